// What a sweep shows and writes: the plan (terminal table and JSON) and, in the sweep's folder,
// sweep.json (the plan with each configuration's state and figures) and sweep_summary.csv (one
// row per condition: settings, estimate, status and what was measured).
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "kvprof/experiment/sweep_plan.hpp"
#include "kvprof/experiment/sweep_state.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::experiment {

// The plan as JSON (`sweep --dry-run --json`), with each configuration's status from `state`
// ("pending" when it has none).
nlohmann::json plan_json(const Plan& plan, const SweepState& state);

// The plan as a table: the runs, memory per GPU, what will not fit and why, the expected time.
std::string plan_text(const Plan& plan, const SweepState& state);

// Writes sweep.json and sweep_summary.csv into `dir` (each via a temporary file renamed into
// place); `status` is the sweep's: running, completed, completed_with_failures, interrupted.
// An io error naming the file.
Expected<void> write_sweep_files(const std::filesystem::path& dir, const Plan& plan,
                                 const SweepState& state, const std::string& config_file,
                                 const std::string& status);

}  // namespace kvprof::experiment
