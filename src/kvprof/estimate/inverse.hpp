// The inverse questions: how many requests fit at a context length, how long a context fits at
// a concurrency, and which GPU types x counts x TP fit a deployment at all.
#pragma once

#include <cstdint>
#include <vector>

#include "kvprof/estimate/estimate.hpp"

namespace kvprof::estimate {

// Whole requests of `context_tokens` tokens the KV cache holds at once (0 when none fits).
uint64_t max_concurrency_at(const Estimate& est, uint64_t context_tokens);

// Longest context (tokens) at which `concurrency` requests fit at once, searched up to
// `limit_tokens`; 0 when not even one token each fits.
uint64_t max_context_at(const Estimate& est, uint32_t concurrency, uint64_t limit_tokens);

struct Recommendation {
  gpu::GpuSpec gpu;
  uint32_t gpu_count = 1;
  uint32_t tp = 1;
  uint32_t pp = 1;
  Estimate estimate;
};

// Catalog GPUs x counts (1, 2, 4, 8) x (TP, PP) on which `base` starts and its whole workload
// fits, smallest (fewest GPUs, then cheapest, then least memory) first; at most `max_results`.
std::vector<Recommendation> recommend(const EstimateInput& base, size_t max_results);

}  // namespace kvprof::estimate
