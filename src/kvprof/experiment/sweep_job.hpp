// One configuration of a sweep as a batch job, seen from both ends: the job description the
// executors submit (scheduler::JobRequest: its name, GPUs, log and the `kvprof sweep --job` command
// line), and inside the job, running that configuration here and writing the result file the
// submitting kvprof collects (<sweep>/jobs/<fingerprint>.result.json).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "kvprof/experiment/sweep_runner.hpp"
#include "kvprof/scheduler/job_scheduler.hpp"

namespace kvprof::experiment {

struct ClusterOptions {
  std::filesystem::path kvprof_path;  // the kvprof the nodes run (absolute)
  std::filesystem::path config_file;  // the sweep file as the nodes see it (absolute)
  std::chrono::milliseconds poll_interval{3000};
  unsigned gpus_per_node = 8;  // a configuration needing more GPUs spans nodes
};

// What a job wrote when its configuration ended: <sweep>/jobs/<fingerprint>.result.json.
struct JobResult {
  std::string fingerprint;
  std::string job_id;
  std::string node;
  std::string status;  // the configuration's: done, partial, failed, interrupted
  std::string reason;
  std::string run_dir;  // empty when no run was made
  double started_unix_s = 0, ended_unix_s = 0;
};

// The job name of configuration `fingerprint` of sweep `sweep` ("kvprof.<sweep>.<fingerprint>"),
// or with an empty fingerprint the prefix every job of the sweep's name starts with.
std::string job_name(const std::string& sweep, const std::string& fingerprint);

// Where the job of `fingerprint` keeps its script, log and result under the sweep's folder.
std::filesystem::path job_file(const std::filesystem::path& sweep_dir,
                               const std::string& fingerprint, const char* suffix);

// The job that runs configuration `pc` of `config`: its name, GPUs (the tensor-parallel size;
// none for a configuration on the CPU), log, and the `kvprof sweep --job` command line.
scheduler::JobRequest job_request(const SweepConfig& config, const PlannedConfig& pc,
                                  const SweepOptions& options, const ClusterOptions& cluster);

// Reads a job's result file; not_found when absent, an input error when it is not one.
Expected<JobResult> read_job_result(const std::filesystem::path& path);

// Runs configuration `fingerprint` of `plan` here, inside a job (it writes nothing to the sweep's
// state, which the submitting kvprof owns), and writes its result file. The GPUs sampled are the
// job's. not_found when the plan has no such configuration.
Expected<JobResult> run_sweep_job(const SweepConfig& config, const Plan& plan,
                                  const SweepOptions& options, const SweepDeps& deps,
                                  const std::string& fingerprint);

}  // namespace kvprof::experiment
