// JSON written by kvprof (run files, --json output): never throws on text that is not valid
// UTF-8 (an engine's log line, a server's message), which would lose a finished run's results;
// such bytes come out as U+FFFD.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kvprof {

// `value` as JSON text, `indent` spaces per level (-1: one line); invalid UTF-8 replaced.
std::string json_text(const nlohmann::json& value, int indent = -1);

// `v`'s value, or null when it has none: unknown is null in kvprof's files, never 0.
template <class T>
nlohmann::json opt_json(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace kvprof
