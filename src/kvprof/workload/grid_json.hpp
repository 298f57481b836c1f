// The workload generator's settings as JSON: what a compact workload.jsonl records so that its
// prompts can be generated again exactly.
#pragma once

#include <nlohmann/json.hpp>

#include "kvprof/util/error.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::workload {

// The version of generate()'s prompt and arrival draws; a file of another version is refused.
inline constexpr int k_generator_version = 1;

// Every setting of `options` that generate() reads, with the generator version.
nlohmann::json grid_json(const GridOptions& options);

// Reads grid_json()'s object back; an input error naming the field that is missing, of the
// wrong type or out of bounds (lists of at most 1000 values, validate()'s bounds), or a
// generator version other than k_generator_version.
Expected<GridOptions> parse_grid_json(const nlohmann::json& doc);

}  // namespace kvprof::workload
