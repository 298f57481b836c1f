// Entry point of the planner: model + GPU + engine settings + workload -> Estimate. Each engine
// profile (vLLM, SGLang, TensorRT-LLM, llama.cpp, HF transformers) reproduces that engine's own
// memory budget; see docs/architecture.md.
#pragma once

#include <optional>

#include "kvprof/estimate/llamacpp_plan.hpp"
#include "kvprof/estimate/result.hpp"
#include "kvprof/estimate/settings.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::estimate {

struct EstimateInput {
  model::ModelSpec model;
  gpu::GpuSpec gpu;
  EngineSettings settings;
  Workload workload;
  std::optional<model::ModelSpec> draft;  // speculative decoding draft model
};

// Estimates per-GPU memory for `input` with the engine it names. Returns a usage error for
// impossible settings (TP not dividing the heads, utilization out of range, context longer than
// the model allows) and an input error when the model lacks what the engine needs.
Expected<Estimate> estimate(const EstimateInput& input);

// The engine profiles, called by estimate().
Expected<Estimate> estimate_vllm(const EstimateInput& input);
Expected<Estimate> estimate_sglang(const EstimateInput& input);
Expected<Estimate> estimate_trtllm(const EstimateInput& input);
Expected<Estimate> estimate_llamacpp(const EstimateInput& input);
Expected<Estimate> estimate_hf(const EstimateInput& input);

// The llama.cpp settings `settings` name (-c 4096 when no context is given), as
// estimate_llamacpp plans them; usage error for a cache type llama.cpp lacks (fp8).
Expected<LlamaCppSettings> llamacpp_settings(const EngineSettings& settings);

}  // namespace kvprof::estimate
