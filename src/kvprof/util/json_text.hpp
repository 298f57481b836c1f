// JSON written by kvprof (run files, --json output): never throws on text that is not valid
// UTF-8 (an engine's log line, a server's message), which would lose a finished run's results;
// such bytes come out as U+FFFD.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kvprof {

// `value` as JSON text, `indent` spaces per level (-1: one line); invalid UTF-8 replaced.
std::string json_text(const nlohmann::json& value, int indent = -1);

}  // namespace kvprof
