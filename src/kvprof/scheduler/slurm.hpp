// Slurm as a JobScheduler: sbatch, squeue, scontrol and scancel run as programs (the cluster's own
// client tools, found in PATH; SLURM_CONF and the rest of the environment are theirs).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvprof/scheduler/job_scheduler.hpp"

namespace kvprof::scheduler {

struct SlurmOptions {
  std::string partition;                 // -p; empty: the cluster's default
  std::string account;                   // -A; empty: the user's default
  std::string time_limit;                // --time, in Slurm's forms ("30", "1:00:00", "1-0")
  std::vector<std::string> sbatch_args;  // more directives, each as sbatch takes it ("--qos=hi")
};

class SlurmScheduler final : public JobScheduler {
 public:
  // not_found (saying how to get Slurm's tools) when sbatch is not in PATH; a usage error for an
  // option Slurm could misread (a newline, a partition name with blanks).
  static Expected<std::unique_ptr<SlurmScheduler>> open(SlurmOptions options);

  [[nodiscard]] std::string name() const override { return "slurm"; }
  [[nodiscard]] std::string script_suffix() const override { return ".sbatch"; }
  [[nodiscard]] Expected<std::string> batch_script(const JobRequest& request) const override;
  Expected<std::string> submit(const std::filesystem::path& script_path) override;
  Expected<std::vector<JobStatus>> list(std::string_view name_prefix) override;
  Expected<JobStatus> status(const std::string& id) override;
  Expected<void> cancel(const std::vector<std::string>& ids) override;

 private:
  explicit SlurmScheduler(SlurmOptions options) : m_options(std::move(options)) {}
  SlurmOptions m_options;
};

}  // namespace kvprof::scheduler
