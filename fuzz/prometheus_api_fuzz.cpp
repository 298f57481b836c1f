// libFuzzer target for a Prometheus server's /api/v1/query answer (JSON) as the remote GPU source
// reads it: never a crash or an exception, every reading names a GPU.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kvprof/gpu/prometheus_api.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto readings = kvprof::gpu::parse_prometheus_query_answer(text);
  if (readings) {
    for (const auto& r : *readings) {
      if (r.key.empty()) std::abort();
    }
  } else if (readings.error().message.empty()) {
    std::abort();
  }
  return 0;
}
