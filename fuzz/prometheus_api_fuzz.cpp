// libFuzzer target for a Prometheus server's HTTP API answers (JSON) as the remote GPU source
// reads them: /api/v1/query (an instant vector) and /api/v1/query_range (a matrix, which fills
// gaps). Never a crash or an exception; every reading names a GPU; instants are in time order.
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
  const auto past = kvprof::gpu::parse_prometheus_range_answer(text);
  if (past) {
    for (size_t i = 0; i < past->size(); ++i) {
      if (i > 0 && (*past)[i].t_wall_ms <= (*past)[i - 1].t_wall_ms) std::abort();
      for (const auto& r : (*past)[i].readings) {
        if (r.key.empty()) std::abort();
      }
    }
  } else if (past.error().message.empty()) {
    std::abort();
  }
  return 0;
}
