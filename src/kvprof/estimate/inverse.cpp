// Inverse questions over an Estimate's capacity and per-request cost, and GPU recommendations.
#include "kvprof/estimate/inverse.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kvprof::estimate {

uint64_t max_concurrency_at(const Estimate& est, uint64_t context_tokens) {
  if (!est.request_kv_bytes || context_tokens == 0) return 0;
  const uint64_t per_request = est.request_kv_bytes(context_tokens);
  if (per_request == 0) return 0;
  uint64_t n = est.kv_capacity_bytes / per_request;
  if (est.max_parallel_requests > 0) n = std::min<uint64_t>(n, est.max_parallel_requests);
  return n;
}

uint64_t max_context_at(const Estimate& est, uint32_t concurrency, uint64_t limit_tokens) {
  if (!est.request_kv_bytes || concurrency == 0) return 0;
  auto fits = [&](uint64_t ctx) {
    return est.request_kv_bytes(ctx) * concurrency <= est.kv_capacity_bytes;
  };
  if (!fits(1)) return 0;
  uint64_t lo = 1;
  uint64_t hi = std::max<uint64_t>(limit_tokens, 1);
  if (fits(hi)) return hi;
  while (lo + 1 < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

std::vector<Recommendation> recommend(const EstimateInput& base, PlanFn plan) {
  std::vector<Recommendation> out;
  for (const auto& g : gpu::gpu_catalog()) {
    for (const uint32_t count : k_recommend_gpu_counts) {
      bool found = false;
      // Pure TP within a node (up to 8); PP across nodes and when the heads do not split further.
      for (uint32_t tp = std::min<uint32_t>(count, 8); tp >= 1 && !found; tp /= 2) {
        const uint32_t pp = count / tp;
        EstimateInput in = base;
        in.gpu = g;
        in.settings.tensor_parallel_size = tp;
        in.settings.pipeline_parallel_size = pp;
        auto est = plan(in);
        // A fit runs the workload without queueing: the verdict is fits or tight.
        if (!est || est->verdict > Verdict::tight) continue;
        out.push_back(Recommendation{g, count, tp, pp, std::move(*est)});
        found = true;
      }
      if (found) break;  // the fewest GPUs of this type are enough
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Recommendation& a, const Recommendation& b) {
    if (a.gpu_count != b.gpu_count) return a.gpu_count < b.gpu_count;
    if (a.gpu.memory_bytes != b.gpu.memory_bytes) return a.gpu.memory_bytes < b.gpu.memory_bytes;
    return a.gpu.id < b.gpu.id;
  });
  return out;
}

std::string recommendation_flags(engines::Engine engine, uint32_t tp, uint32_t pp) {
  const auto pair = [&](std::string_view tp_flag, std::string_view pp_flag) {
    return pp > 1 ? fmt::format("{} {} {} {}", tp_flag, tp, pp_flag, pp)
                  : fmt::format("{} {}", tp_flag, tp);
  };
  const auto& row = engines::engine_row(engine);
  if (row.tensor_parallel_flag.empty()) return "";
  return pair(row.tensor_parallel_flag, row.pipeline_parallel_flag);
}

}  // namespace kvprof::estimate
