// The job this process runs in (see job_environment.hpp).
#include "kvprof/scheduler/job_environment.hpp"

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <string_view>

namespace kvprof::scheduler {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v).substr(0, 4096);
}

// A small count from the environment ("2"); 1 when absent or not one.
unsigned count_or_one(const std::string& text) {
  unsigned v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && ptr == text.data() + text.size() && v >= 1 && v <= 100000 ? v : 1;
}

// The node's name: the scheduler's word for it, else the host name.
std::string node_name(const char* scheduler_variable) {
  if (std::string node = env(scheduler_variable); !node.empty()) return node.substr(0, 253);
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

}  // namespace

std::optional<std::vector<unsigned>> gpu_index_list(const std::string& text) {
  std::vector<unsigned> out;
  size_t at = 0;
  while (at <= text.size() && !text.empty()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    unsigned v = 0;
    const char* begin = text.data() + at;
    const char* end = text.data() + comma;
    const auto [ptr, ec] = std::from_chars(begin, end, v);
    if (begin == end || ec != std::errc() || ptr != end || v > 4096 || out.size() >= 4096)
      return std::nullopt;
    out.push_back(v);
    at = comma + 1;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::optional<JobEnvironment> current_job() {
  const std::string id = env("SLURM_JOB_ID");
  // A pod of a Job kvprof submitted: the Job's name (its manifest sets it); the device plugin
  // shows the pod only its own GPUs, so all are sampled.
  if (const std::string job = env("KVPROF_JOB_ID"); id.empty() && !job.empty())
    return JobEnvironment{
        "kubernetes", job.substr(0, 64), {}, node_name("KVPROF_NODE_NAME"), 1, {}};
  if (id.empty()) {
    // A pod of an Indexed Job: the device plugin shows it only its own GPUs, so all are sampled.
    if (const std::string index = env("JOB_COMPLETION_INDEX"); !index.empty()) {
      return JobEnvironment{"kubernetes",
                            (env("HOSTNAME") + "/" + index).substr(0, 128),
                            {},
                            node_name("KVPROF_NODE_NAME"),
                            1,
                            {}};
    }
    return std::nullopt;
  }
  JobEnvironment job{"slurm", id.substr(0, 64), {}, node_name("SLURMD_NODENAME"), 1, {}};
  job.nodes = count_or_one(env("SLURM_JOB_NUM_NODES"));
  if (job.nodes > 1) {
    // A step beside the job's own (--overlap: it takes no resources from it), one task per node,
    // whose ending on one node does not end the others.
    const std::string n = std::to_string(job.nodes);
    job.every_node_prefix = {"srun",          "--overlap",           "--nodes=" + n,
                             "--ntasks=" + n, "--ntasks-per-node=1", "--kill-on-bad-exit=0",
                             "--quiet"};
  }
  if (auto gpus = gpu_index_list(env("SLURM_JOB_GPUS"))) {
    job.gpus = std::move(*gpus);
  } else if (auto visible = gpu_index_list(env("CUDA_VISIBLE_DEVICES"))) {
    job.gpus = std::move(*visible);
  }
  return job;
}

}  // namespace kvprof::scheduler
