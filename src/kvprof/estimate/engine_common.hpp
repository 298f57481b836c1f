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

// Sets est.verdict from headroom and rows (oom when the engine cannot start, tight when a row
// is over capacity or headroom is under 2% of the GPU).
void finish_verdict(Estimate& est, bool engine_starts);

// Default workload rows when none was given: max_model_len at concurrency 1.
Workload default_workload(const Workload& w, uint64_t max_model_len);

}  // namespace kvprof::estimate
