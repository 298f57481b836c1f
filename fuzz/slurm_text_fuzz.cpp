// libFuzzer target for what Slurm's commands print (scontrol show job -o, squeue's lines) and for
// a job's GPU list: whatever the bytes, reading them is an error value or jobs, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvprof/scheduler/job_environment.hpp"
#include "kvprof/scheduler/slurm_text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvprof::scheduler;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto jobs = parse_scontrol_jobs(text)) {
    for (const auto& j : *jobs)
      (void)j.ended_by_itself();
  }
  (void)parse_squeue_jobs(text);
  (void)gpu_index_list(std::string(text.substr(0, 4096)));
  return 0;
}
