// Where each configuration of a sweep stands (`kvprof sweep --config X --status`): what its
// state file records (done, partial, failed, skipped, not yet run) and, on a cluster, what the
// scheduler says of its job now (queued and why, running on which node). It starts nothing.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/experiment/sweep_plan.hpp"
#include "kvprof/experiment/sweep_state.hpp"
#include "kvprof/scheduler/job_scheduler.hpp"

namespace kvprof::experiment {

struct ConfigStatus {
  std::string id;
  std::string label;
  std::string status;  // the state file's ("done", "failed", ...) or "not run"
  std::string reason;
  std::string run_id;
  std::optional<scheduler::JobStatus> job;  // its job, while the scheduler lists it
};

// Each configuration of `plan`, in order, with its record in `state` and its job among `jobs`
// (those the scheduler lists for sweep `sweep_name`; empty without a scheduler).
std::vector<ConfigStatus> sweep_status(const Plan& plan, const SweepState& state,
                                       const std::string& sweep_name,
                                       const std::vector<scheduler::JobStatus>& jobs);

// A table: configuration, status (a listed job's state first), run or job, why.
std::string sweep_status_text(const std::vector<ConfigStatus>& statuses);

// The same as JSON: an array of {id, label, status, reason, run_id, job: {id, state, node,
// reason} | null}.
nlohmann::json sweep_status_json(const std::vector<ConfigStatus>& statuses);

}  // namespace kvprof::experiment
