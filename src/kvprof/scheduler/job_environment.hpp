// What a batch job finds in its environment: its id and the GPUs the scheduler gave it, so that a
// run inside a job samples those GPUs and says which job it was.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kvprof::scheduler {

struct JobEnvironment {
  std::string scheduler;  // "slurm"
  std::string job_id;
  std::vector<unsigned> gpus;  // the node's GPU indices given to the job; empty: none said
  std::string node;            // this node's name as the scheduler says it, else the host name
  unsigned nodes = 1;          // the nodes the job holds
  // The command prefix that runs a program once on every node of the job, beside what runs
  // there already (Slurm: an overlapping `srun` step); empty for a job of one node.
  std::vector<std::string> every_node_prefix;
};

// The job this process runs in (Slurm: SLURM_JOB_ID, and SLURM_JOB_GPUS, else a numeric
// CUDA_VISIBLE_DEVICES; a pod of a Job kvprof submitted: KVPROF_JOB_ID; a Kubernetes Indexed
// Job's pod: its name and JOB_COMPLETION_INDEX);
// nullopt outside a job.
std::optional<JobEnvironment> current_job();

// "0,2,3" -> {0, 2, 3}; nullopt when any item is not a small number (UUIDs, MIG names).
std::optional<std::vector<unsigned>> gpu_index_list(const std::string& text);

}  // namespace kvprof::scheduler
