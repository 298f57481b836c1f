// What `profile --estimate-with` assumed, and why its comparison may be off: the plan's settings
// with where each came from (given, default, detected, assumed), the server's own figures the
// plan can be checked against (max_model_len from /v1/models), one line naming the likely cause
// of each component beyond 10%, and the wording of a simulated run's comparison.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/engines/assumptions.hpp"
#include "kvprof/estimate/result.hpp"
#include "kvprof/profile/breakdown.hpp"
#include "kvprof/profile/summary.hpp"

namespace kvprof::profile {

// What the plan assumed lives with the planner (estimate/assumptions.hpp); profile uses it too.
using engines::assumptions_text;
using engines::AssumptionSources;
using engines::estimate_assumptions;
using engines::gpu_origin_name;
using engines::GpuOrigin;
using engines::modelled_engine_version;

// What a simulated run's breakdown, confidence and errors are (they compare the planner with a
// server it sized itself).
inline constexpr std::string_view k_simulated_nature =
    "simulated (checks the measurement pipeline, not the planner)";

// The server's figures beyond /metrics as comparison rows: max_model_len (tokens) of `model` in
// /v1/models, when listed.
void add_server_rows(const ServerInfo& server, const std::string& model,
                     const estimate::Estimate& est, std::vector<ComparisonRow>& rows);

// One line per comparison row beyond 10% naming its likely cause from the evidence in `report`
// (the GPU's total memory, the server's blocks, max_model_len and version, the GPUs in use), and
// for a block count off by more than 2x that the flags probably do not describe this server.
std::vector<std::string> diagnose_comparison(const ProfileReport& report,
                                             const estimate::Estimate& est);

// Adds to a profile's summary.json what this file knows: "simulation", the nature of
// memory_breakdown and estimate_comparison (measured, or k_simulated_nature with the overall
// confidence replaced by it), and the comparison's "assumptions" and "likely_causes".
void annotate_summary(const ProfileReport& report, nlohmann::json& summary);

// The terminal lines after the comparison: what the estimate assumed, and the likely causes.
std::string estimate_check_text(const ProfileReport& report);

}  // namespace kvprof::profile
