// Names and per-device totals of an EngineLogReport (see report.hpp).
#include "kvprof/enginelog/log_report.hpp"

#include <algorithm>

namespace kvprof::enginelog {

bool PrintedSize::contains(uint64_t other_bytes) const {
  const uint64_t diff = other_bytes > bytes ? other_bytes - bytes : bytes - other_bytes;
  return diff <= tolerance_bytes;
}

std::vector<DeviceTotals> totals_by_device(const EngineLogReport& report) {
  std::vector<DeviceTotals> totals;
  for (const auto& f : report.figures) {
    if (f.superseded) continue;
    uint64_t DeviceTotals::*field = nullptr;
    switch (f.component) {
      case Component::weights:
        field = &DeviceTotals::weights_bytes;
        break;
      case Component::kv_cache:
        field = &DeviceTotals::kv_cache_bytes;
        break;
      case Component::compute:
        field = &DeviceTotals::compute_bytes;
        break;
      case Component::output:
        field = &DeviceTotals::output_bytes;
        break;
      case Component::cuda_graph:
        field = &DeviceTotals::cuda_graph_bytes;
        break;
      default:
        continue;
    }
    auto it = std::find_if(totals.begin(), totals.end(),
                           [&](const DeviceTotals& t) { return t.device == f.device; });
    if (it == totals.end()) {
      totals.push_back(DeviceTotals{.device = f.device});
      it = totals.end() - 1;
    }
    // Saturate: a hostile log can print sizes whose sum overflows.
    uint64_t& slot = (*it).*field;
    if (__builtin_add_overflow(slot, f.size.bytes, &slot)) slot = UINT64_MAX;
  }
  return totals;
}

bool has_memory_figures(const EngineLogReport& report) {
  return !report.figures.empty() || !report.breakdown.empty();
}

std::string_view component_name(Component component) {
  switch (component) {
    case Component::weights:
      return "weights";
    case Component::kv_cache:
      return "kv_cache";
    case Component::kv_cache_k:
      return "kv_cache_k";
    case Component::kv_cache_v:
      return "kv_cache_v";
    case Component::compute:
      return "compute";
    case Component::output:
      return "output";
    case Component::cuda_graph:
      return "cuda_graph";
    case Component::activation_peak:
      return "activation_peak";
    case Component::non_torch:
      return "non_torch";
    case Component::non_kv_total:
      return "non_kv_total";
  }
  return "unknown";
}

}  // namespace kvprof::enginelog
