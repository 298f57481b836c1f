// libFuzzer target for what kubectl prints about Jobs and pods (`get jobs -o json`, `get job X -o
// json` with `get pods -l job-name=X -o json`): whatever the bytes, reading them is an error value
// or jobs, never a crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kvprof/scheduler/kubectl_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvprof::scheduler;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto jobs = parse_kubectl_jobs(text)) {
    for (const auto& j : *jobs)
      (void)j.ended_by_itself();
  }
  // The first half as the Job, the rest as its pods.
  (void)parse_kubectl_job(text.substr(0, size / 2), text.substr(size / 2));
  (void)parse_kubectl_job(text, text);
  return 0;
}
