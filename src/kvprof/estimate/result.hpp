// The answer of an estimate: per-GPU components in bytes, what the engine itself will log, one
// row per (context, concurrency) of the workload, and the verdict.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvprof/estimate/kv.hpp"
#include "kvprof/estimate/settings.hpp"
#include "kvprof/estimate/weights.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/model_spec.hpp"

namespace kvprof::estimate {

// What will happen, mildest first: it fits; fits with under 10% of the KV cache (or 2% of the GPU)
// to spare; requests queue or get preempted (KV demand over the cache: the engine waits, it does
// not crash); a request is rejected (longer than max_model_len or a slot); the engine does not
// start (weights and fixed costs over its budget); or memory runs out while serving (engines
// without a paged cache).
enum class Verdict : uint8_t { fits, tight, queues, rejected, does_not_start, oom };
// "fits", "tight", "queues", "rejected", "does_not_start", "oom".
std::string_view verdict_name(Verdict v);
// The same for people: "does not start" instead of "does_not_start".
std::string verdict_text(Verdict v);

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
  // Reserved pages a process never touches (llama.cpp's compute buffer in host RAM): part of
  // activation_bytes, which is what the engine reserves, but not of total_bytes, what is resident.
  uint64_t untouched_bytes = 0;
  uint64_t total_bytes = 0;  // all of the above, less untouched_bytes

  // Everything but weights, KV cache and activations: total_bytes less those three (and the
  // draft's weights), below zero where reserved pages are never touched, so the parts add up.
  int64_t overhead_bytes() const {
    return static_cast<int64_t>(total_bytes) - static_cast<int64_t>(weights_bytes + draft_bytes) -
           static_cast<int64_t>(kv_cache_bytes) - static_cast<int64_t>(activation_bytes);
  }
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
  uint32_t cuda_graphs = 0;  // CUDA graphs captured per GPU (0: eager or not modelled)
  // The graphs per set where the engine captures several ("draft_len_4", "draft_len_0": each
  // speculative draft length TensorRT-LLM warms up); empty otherwise.
  std::vector<std::pair<std::string, uint32_t>> cuda_graph_sets;
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

// llama.cpp's placement: host RAM as a budget of its own, and the largest -ngl and -c that fit.
// One GPU of a llama.cpp plan: what llama.cpp puts on it and what it needs in all.
struct LlamaCppGpu {
  std::string device;   // "CUDA0"
  uint32_t layers = 0;  // repeating layers it holds
  bool output = false;  // the output layer too
  uint64_t model_bytes = 0, kv_bytes = 0, compute_bytes = 0;
  uint64_t total_bytes = 0;   // those, and the CUDA context when it holds anything
  uint64_t budget_bytes = 0;  // its usable memory
};

struct LlamaCppSummary {
  bool has_gpu = false;
  std::vector<LlamaCppGpu> gpus;    // each GPU, CUDA0 first (none without a GPU)
  uint32_t gpu_layers = 0;          // repeating layers offloaded
  bool output_on_gpu = false;       // the output layer too (-ngl above the layer count)
  uint32_t kv_cells = 0;            // cells of a full-attention layer (all slots)
  uint32_t kv_cells_swa = 0;        // cells of a sliding-window layer
  uint64_t host_weights_bytes = 0;  // resident weights (mapped pages once used, repacked copies)
  uint64_t host_kv_bytes = 0;
  uint64_t host_compute_reserved_bytes = 0;  // the host compute buffer llama.cpp allocates
  uint64_t host_compute_bytes = 0;  // the part of the compute buffer a running server touches
  uint64_t host_output_bytes = 0;
  uint64_t host_runtime_bytes = 0;  // libllama, ggml, vocabulary
  uint64_t host_total_bytes = 0;
  uint64_t host_budget_bytes = 0;  // --host-mem, or this machine's RAM
  int64_t host_headroom_bytes = 0;
  std::optional<uint32_t> max_gpu_layers;  // largest -ngl that fits (with a GPU)
  // A MoE model on a GPU: the fewest --n-cpu-moe layers that make it fit (none: even all do not).
  std::optional<uint32_t> min_n_cpu_moe;
  uint64_t max_ctx_size = 0;  // largest -c (multiple of 256) that fits; 0 = none
  // llama.cpp's debug line for each tensor an override (-ot, --cpu-moe) placed.
  std::vector<std::string> override_lines;
  // --fit: what llama-fit-params would print (-c N -ngl N [-ot "..."]), whether it met its
  // target, and the lines it logs; empty args without --fit.
  std::string fit_args;
  bool fit_success = true;
  std::vector<std::string> fit_lines;
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
  uint32_t max_parallel_requests = 0;       // engine slot limit (llama.cpp -np), 0 = none
  std::optional<LlamaCppSummary> llamacpp;  // llama.cpp only
  // Host memory the engine pins for each GPU: offloaded weights, V0's swap space, an offloaded
  // KV cache (vLLM --cpu-offload-gb, --swap-space, --kv-offloading-size).
  uint64_t host_pinned_bytes = 0;

  Verdict verdict = Verdict::fits;
  // Where the engine dies when it does not start: "loading weights", "the profile run",
  // "KV cache allocation" or "CUDA graph capture"; empty when it starts.
  std::string start_failure;
  int64_t headroom_bytes = 0;  // GPU memory - total (negative: does not fit)
  uint32_t binding_pp_rank = 0;
  std::string confidence = "high";  // high / medium / low
  std::vector<std::string> warnings;
  std::vector<std::string> notes;  // how the figures were obtained
};

}  // namespace kvprof::estimate
