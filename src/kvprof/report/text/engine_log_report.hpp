// Renders an enginelog::EngineLogReport: the JSON document of `parse-log --json` (every figure
// in bytes with its tolerance, line number and line) and the readable terminal tables.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kvprof/enginelog/log_report.hpp"

namespace kvprof::report::text {

inline constexpr int k_engine_log_schema_version = 1;

// The JSON object of one parsed log; every string is valid UTF-8 (bad bytes become U+FFFD).
nlohmann::json engine_log_json(const enginelog::EngineLogReport& log);

// The terminal report: figures (component, device, size as printed, line), per-device totals,
// the breakdown table, settings and model facts.
std::string engine_log_text(const enginelog::EngineLogReport& log);

}  // namespace kvprof::report::text
