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

// GPU counts --recommend tries: one node of up to 8, then two nodes (TP within a node, PP across).
inline constexpr uint32_t k_recommend_gpu_counts[] = {1, 2, 4, 8, 16};

// Every catalog GPU with the fewest GPUs (k_recommend_gpu_counts) x (TP, PP) on which `base`
// starts and its whole workload runs without queueing (verdict fits or tight), as `plan`
// (engines::plan) answers, sorted by GPU count, then memory per GPU, then name.
std::vector<Recommendation> recommend(const EstimateInput& base, PlanFn plan);

// The engine's own flags for a recommendation, to paste: "--tensor-parallel-size 8
// --pipeline-parallel-size 2" (vLLM), "--tp-size 8 --pp-size 2" (SGLang), "--tp_size 8 --pp_size
// 2" (TensorRT-LLM); llama.cpp splits layers over the GPUs by itself.
std::string recommendation_flags(engines::Engine engine, uint32_t tp, uint32_t pp);

}  // namespace kvprof::estimate
