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

// One workload row's verdict: oom over max_model_len (0 = no limit) or over capacity, tight over
// 90% of it.
Verdict row_verdict(uint64_t context_tokens, uint64_t max_model_len, double used_fraction);

// The deployment's verdict: oom when the engine cannot start or the GPU is over, tight when a
// row is (`worst_row` is tight or oom) or headroom is under 2% of the GPU.
Verdict deployment_verdict(bool engine_starts, int64_t headroom_bytes, uint64_t gpu_memory_bytes,
                           Verdict worst_row);

// Sets est.verdict from headroom and rows (oom when the engine cannot start, tight when a row
// is over capacity or headroom is under 2% of the GPU).
void finish_verdict(Estimate& est, bool engine_starts);

// Default workload rows when none was given: max_model_len at concurrency 1.
Workload default_workload(const Workload& w, uint64_t max_model_len);

}  // namespace kvprof::estimate
