// The answer of an estimate: per-GPU components in bytes, what the engine itself will log, one
// row per (context, concurrency) of the workload, and the verdict.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/estimate/kv.hpp"
#include "kvprof/estimate/settings.hpp"
#include "kvprof/estimate/weights.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/model_spec.hpp"

namespace kvprof::estimate {

enum class Verdict : uint8_t { fits, tight, oom };
std::string_view verdict_name(Verdict v);  // "fits", "tight", "oom"

// Seed 004's risk level from the fraction of capacity used: low < 0.7 <= medium < 0.9 <= high
// <= 1.0 < critical.
std::string_view risk_level(double used_fraction);

// Memory of the busiest GPU (the binding pipeline rank), bytes.
struct MemoryBreakdown {
  uint64_t weights_bytes = 0;
  uint64_t kv_cache_bytes = 0;    // the KV pool the engine allocates (or the workload needs)
  uint64_t activation_bytes = 0;  // profile-run / forward peak
  uint64_t cuda_graph_bytes = 0;
  uint64_t non_torch_bytes = 0;     // NCCL / custom all-reduce / cuBLAS workspaces
  uint64_t cuda_context_bytes = 0;  // CUDA context and allocator baseline before loading
  uint64_t draft_bytes = 0;         // speculative-decoding draft model weights
  uint64_t total_bytes = 0;         // all of the above
};

// The figures the engine prints at startup, computed as the engine computes them.
struct EngineReport {
  uint64_t available_kv_cache_bytes = 0;  // vLLM "Available KV cache memory"
  uint64_t kv_cache_tokens = 0;           // vLLM "GPU KV cache size: N tokens"
  uint64_t num_gpu_blocks = 0;
  double max_concurrency = 0;  // vLLM "Maximum concurrency for max_model_len"
  uint32_t block_size = 0;
  uint32_t num_kv_cache_groups = 0;
  uint64_t max_model_len = 0;
  uint32_t max_num_seqs = 0;
  uint32_t max_num_batched_tokens = 0;
  double memory_fraction = 0;           // gpu_memory_utilization / mem_fraction_static / ...
  uint64_t requested_memory_bytes = 0;  // total * fraction (vLLM), or the engine's budget
  std::vector<std::string> log_lines;   // the lines as the engine prints them
};

struct WorkloadRow {
  uint64_t context_tokens = 0;
  uint32_t concurrency = 0;
  uint64_t kv_needed_bytes = 0;    // cache this workload needs per GPU
  uint64_t kv_capacity_bytes = 0;  // cache the engine can give it per GPU
  uint64_t total_bytes = 0;        // per-GPU memory with this workload
  int64_t margin_bytes = 0;        // capacity - needed (negative: does not fit)
  Verdict verdict = Verdict::fits;
  std::string risk;
  std::string note;
};

struct Estimate {
  std::string model_id;
  std::string model_source;
  gpu::GpuSpec gpu;
  EngineSettings settings;  // with the engine's defaults filled in
  model::DType compute_dtype = model::DType::bf16;
  std::string quantization;  // effective method name, "none" when unquantized
  uint32_t gpus_total = 1;   // tp * pp * dp

  WeightBreakdown weights;               // of the binding rank
  uint64_t kv_bytes_per_token = 0;       // per GPU, all attention layers, window ignored
  uint64_t state_bytes_per_request = 0;  // per GPU, SSM / linear-attention layers
  bool kv_heads_replicated = false;
  MemoryBreakdown per_gpu;
  EngineReport engine_report;
  std::vector<WorkloadRow> rows;

  // Cache capacity per GPU and what one request of N tokens takes from it (paging, windows and
  // state included): the inverse questions are answered from these two.
  uint64_t kv_capacity_bytes = 0;
  std::function<uint64_t(uint64_t)> request_kv_bytes;
  uint32_t max_parallel_requests = 0;  // engine slot limit (llama.cpp -np), 0 = none

  Verdict verdict = Verdict::fits;
  int64_t headroom_bytes = 0;  // GPU memory - total (negative: does not fit)
  uint32_t binding_pp_rank = 0;
  std::string confidence = "high";  // high / medium / low
  std::vector<std::string> warnings;
  std::vector<std::string> notes;  // how the figures were obtained
};

}  // namespace kvprof::estimate
