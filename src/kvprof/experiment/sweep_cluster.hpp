// A sweep on a cluster: each configuration that is not finished becomes one batch job of the
// cluster's scheduler (scheduler::JobScheduler: Slurm), which runs `kvprof sweep --job` on the
// node it is given and writes its run folder under the sweep's results folder (storage the nodes
// share). The kvprof that submitted the jobs follows them (queued, running on which node, ended
// and how), imports each finished run into the sweep's state and the history, and can be stopped
// and run again: jobs still queued or running are found again by name, a job that ended while no
// one watched is collected from the result it wrote, and only what has no result is submitted.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include "kvprof/experiment/sweep_job.hpp"
#include "kvprof/scheduler/job_scheduler.hpp"

namespace kvprof::experiment {

struct ClusterDeps {
  // Asked once when the sweep is stopped with jobs queued or running (their count given): true
  // cancels them, false leaves them to finish (a later run collects them). Null: leave them.
  std::function<bool(size_t)> cancel_on_interrupt;
};

// Submits and follows the jobs of `plan` on `scheduler` until every one ended or the sweep is
// stopped. Errors as run_sweep's; a job the scheduler refuses or kills is a failed configuration.
Expected<SweepOutcome> run_sweep_on_cluster(const SweepConfig& config, const Plan& plan,
                                            const SweepOptions& options,
                                            const ClusterOptions& cluster,
                                            scheduler::JobScheduler& scheduler,
                                            const SweepDeps& deps, const ClusterDeps& cluster_deps);

}  // namespace kvprof::experiment
