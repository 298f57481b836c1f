// The job this process runs in (see job_environment.hpp).
#include "kvprof/scheduler/job_environment.hpp"

#include <charconv>
#include <cstdlib>

namespace kvprof::scheduler {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v).substr(0, 4096);
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
    return JobEnvironment{"kubernetes", job.substr(0, 64), {}};
  if (id.empty()) {
    // A pod of an Indexed Job: the device plugin shows it only its own GPUs, so all are sampled.
    if (const std::string index = env("JOB_COMPLETION_INDEX"); !index.empty())
      return JobEnvironment{"kubernetes", (env("HOSTNAME") + "/" + index).substr(0, 128), {}};
    return std::nullopt;
  }
  JobEnvironment job{"slurm", id.substr(0, 64), {}};
  if (auto gpus = gpu_index_list(env("SLURM_JOB_GPUS"))) {
    job.gpus = std::move(*gpus);
  } else if (auto visible = gpu_index_list(env("CUDA_VISIBLE_DEVICES"))) {
    job.gpus = std::move(*visible);
  }
  return job;
}

}  // namespace kvprof::scheduler
