// A cluster's job scheduler as kvprof uses it: submit a batch script, find jobs again by name,
// follow their state, cancel them. Slurm (slurm.hpp) and Kubernetes (kubernetes.hpp) implement
// it; another scheduler (PBS) is another implementation of this interface, not a branch in the
// sweep.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::scheduler {

// Where a job is in its life, in kvprof's words; `state` keeps the scheduler's own.
enum class JobPhase { pending, running, ended };

struct JobStatus {
  std::string id;
  std::string name;
  JobPhase phase = JobPhase::pending;
  std::string state;   // the scheduler's: PENDING, RUNNING, COMPLETED, OUT_OF_MEMORY, TIMEOUT, ...
  std::string reason;  // why it waits or ended, as the scheduler says it ("Resources", "None")
  std::string node;    // where it runs or ran; empty while pending
  int exit_code = 0;   // of the batch script, once ended
  // True when it ended with its script's own exit (COMPLETED or FAILED), not killed by the
  // scheduler (OOM, TIMEOUT, NODE_FAIL, PREEMPTED, CANCELLED).
  [[nodiscard]] bool ended_by_itself() const;
};

// What a job asks for; the scheduler turns it into its own directives.
struct JobRequest {
  std::string name;     // [A-Za-z0-9._-], at most 200: how the job is found again
  std::string comment;  // free text shown by the scheduler's tools
  unsigned gpus = 0;    // per node
  unsigned nodes = 1;
  std::filesystem::path log_path;    // the job's stdout and stderr
  std::filesystem::path work_dir;    // where it starts
  std::vector<std::string> command;  // the program and its arguments, each one word
  // What the job reads and writes besides: it must be on storage the nodes share (the sweep
  // file, the results folder).
  std::vector<std::filesystem::path> shared_paths;
};

class JobScheduler {
 public:
  virtual ~JobScheduler() = default;
  // "slurm", for messages.
  [[nodiscard]] virtual std::string name() const = 0;
  // How the batch script's file ends (".sbatch", ".json").
  [[nodiscard]] virtual std::string script_suffix() const = 0;
  // The batch script that `submit` hands the scheduler for `request`.
  [[nodiscard]] virtual Expected<std::string> batch_script(const JobRequest& request) const = 0;
  // Submits the script written at `script_path`; returns the job's id. An io error with the
  // scheduler's own message when it refuses.
  virtual Expected<std::string> submit(const std::filesystem::path& script_path) = 0;
  // The jobs of this user the scheduler still lists whose names start with `name_prefix`.
  virtual Expected<std::vector<JobStatus>> list(std::string_view name_prefix) = 0;
  // One job, also after it ended while the scheduler remembers it; not_found once forgotten.
  virtual Expected<JobStatus> status(const std::string& id) = 0;
  // Cancels the jobs `ids` (those already ended are left as they are).
  virtual Expected<void> cancel(const std::vector<std::string>& ids) = 0;
};

}  // namespace kvprof::scheduler
