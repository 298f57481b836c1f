// Renders an Estimate: the JSON document (schema_version 1, every input, every component in
// bytes, the engine's own figures) and the readable terminal table.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvprof/estimate/inverse.hpp"
#include "kvprof/estimate/result.hpp"

namespace kvprof::report::text {

inline constexpr int k_estimate_schema_version = 1;

// The JSON object of one estimate (see docs/estimate-json.md for the fields).
nlohmann::json estimate_json(const estimate::Estimate& est);

// The terminal report of one estimate.
std::string estimate_text(const estimate::Estimate& est);

// JSON (every fit) and text (the first `max_rows`, 0 = all, and how many more) of a --recommend
// answer.
nlohmann::json recommendations_json(const std::vector<estimate::Recommendation>& recs,
                                    uint64_t context_tokens);
std::string recommendations_text(const std::vector<estimate::Recommendation>& recs,
                                 uint64_t context_tokens, size_t max_rows);

}  // namespace kvprof::report::text
