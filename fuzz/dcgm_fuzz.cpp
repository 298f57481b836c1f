// libFuzzer target for remote GPU sources: a DCGM exporter page through parse_dcgm_metrics, the
// first line doubling as a label selector; the readings must be well formed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kvprof/gpu/dcgm.hpp"
#include "kvprof/gpu/remote_source.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvprof::gpu;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto selector = parse_label_selector(text.substr(0, text.find('\n')));
  const auto readings =
      parse_dcgm_metrics(text, selector ? *selector : std::vector<LabelMatcher>{});
  if (readings) {
    for (size_t i = 0; i < readings->size(); ++i) {
      const auto& r = (*readings)[i];
      if (r.key.empty()) std::abort();
      for (size_t j = i + 1; j < readings->size(); ++j) {
        if ((*readings)[j].key == r.key) std::abort();  // one reading per GPU
      }
      const auto m = to_device_memory(r, static_cast<unsigned>(i));
      if (m.total_bytes && r.used_bytes && r.free_bytes && !r.total_bytes &&
          *m.total_bytes < *r.used_bytes) {
        std::abort();
      }
    }
  }
  return 0;
}
