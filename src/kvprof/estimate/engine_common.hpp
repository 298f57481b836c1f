// Pieces every engine profile shares: validating parallelism, choosing the compute dtype and the
// effective quantization, and turning KV capacity into workload rows and a verdict.
#pragma once

#include <functional>
#include <string>

#include "kvprof/estimate/estimate.hpp"

namespace kvprof::estimate {

// Checks parallel sizes against the model (heads divisible by TP, PP <= layers, ...); returns
// a usage error naming the setting.
Expected<void> validate_parallelism(const model::ModelSpec& m, const EngineSettings& s);

// True for a --gpu-memory-utilization in (0, 1].
bool valid_memory_fraction(double fraction);

// The dtype unquantized weights and activations use: --dtype, else the checkpoint's, with fp32
// checkpoints served in bf16 like vLLM's "auto".
model::DType resolve_compute_dtype(const model::ModelSpec& m, const EngineSettings& s);

// The quantization in effect: the checkpoint's, or a runtime one (--quantization fp8 on an
// unquantized checkpoint). Returns a usage error when --quantization contradicts the checkpoint.
Expected<model::Quantization> resolve_quantization(const model::ModelSpec& m,
                                                   const EngineSettings& s);

// Name of a quantization method for output ("none", "fp8", "awq", ...).
std::string quant_name(const model::Quantization& q);

// Fills est.rows from the workload: `capacity_bytes` of cache per GPU, `per_request_bytes(ctx)`
// what one request of ctx tokens holds; `paged` engines queue instead of failing when over.
void fill_rows(Estimate& est, const Workload& w, uint64_t capacity_bytes, bool paged,
               std::function<uint64_t(uint64_t)> per_request_bytes);

// Fraction of `capacity_bytes` a workload needing `needed_bytes` uses (2.0 without capacity).
double kv_used_fraction(uint64_t needed_bytes, uint64_t capacity_bytes);

// What one workload row asks of the cache.
struct RowDemand {
  uint64_t context_tokens = 0;
  uint64_t max_model_len = 0;      // 0: no limit
  uint64_t needed_bytes = 0;       // all its requests
  uint64_t per_request_bytes = 0;  // one of them
  uint64_t capacity_bytes = 0;
  bool paged = true;  // the engine queues or preempts when the cache is full
};

// One workload row's verdict: rejected over max_model_len or when one request outgrows the
// cache; queues (paged) or oom (not paged) over the cache; tight over 90% of it; else fits.
Verdict row_verdict(const RowDemand& demand);

// The deployment's verdict: does_not_start when the engine cannot start or its memory is over the
// GPU's; else the worst row, at least tight when headroom is under 2% of the GPU.
Verdict deployment_verdict(bool engine_starts, int64_t headroom_bytes, uint64_t gpu_memory_bytes,
                           Verdict worst_row);

// Where an engine that does not start dies, from its per-GPU memory in the order it is taken:
// "loading weights", "the profile run", "KV cache allocation" or "CUDA graph capture".
std::string start_failure_stage(const MemoryBreakdown& mb, uint64_t gpu_memory_bytes,
                                bool engine_starts);

// Sets est.verdict (see deployment_verdict) and est.start_failure from headroom and rows; an engine
// without a `paged` cache that loads its weights runs out of memory (oom) instead.
void finish_verdict(Estimate& est, bool engine_starts, bool paged = true);

// When est.verdict is does_not_start: every row says so too (nothing runs).
void mark_rows_not_started(Estimate& est);

// Default workload rows when none was given: max_model_len at concurrency 1.
Workload default_workload(const Workload& w, uint64_t max_model_len);

}  // namespace kvprof::estimate
