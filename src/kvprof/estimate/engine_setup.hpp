// The set-up the SGLang, TensorRT-LLM and HF transformers profiles share: validating the
// settings, resolving dtype and quantization, weights and KV layout of rank 0, the runtime
// memory (activations, non-torch, CUDA graphs) and the closing verdict.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kvprof/estimate/engine_common.hpp"
#include "kvprof/estimate/kv.hpp"
#include "kvprof/estimate/weights.hpp"

namespace kvprof::estimate {

// What every profile starts from.
struct EngineSetup {
  Estimate est;
  model::Quantization quant;
  KvLayout layout;
};

// Validation, dtype, quantization, max_model_len default, weights and KV layout of rank 0; a
// usage error when the settings do not fit the model.
Expected<EngineSetup> prepare_engine(const EstimateInput& in, EngineSettings settings);

// How the settings split the weights over one GPU's ranks (SGLang's and TensorRT-LLM's DP
// attention, expert parallel, dense TP; vLLM's own split is in engines/vllm/budget.cpp).
WeightOptions parallel_split(const EngineSettings& s);

// mb.total_bytes as the sum of its parts; returns it.
uint64_t sum_total(MemoryBreakdown& mb);

// Per-request cache with sliding layers bounded by their window.
std::function<uint64_t(uint64_t)> request_bytes(const KvLayout& layout);

// Into est.per_gpu: activations of a profile run of max_num_batched_tokens over `requests`,
// non-torch memory, and `graph_sets` sets of CUDA graphs (none with enforce_eager).
void add_runtime_bytes(Estimate& est, const model::ModelSpec& m, uint32_t requests,
                       uint32_t graph_sets);

// The engine-report fields taken from the settings in effect (all set by the caller); the block
// size is 1 token when unset.
void report_settings(EngineReport& rep, const EngineSettings& s);

// Sets the verdict, lowers "high" confidence to "medium" (the engine's rule is reproduced, not
// measured) and adds the note stating that rule.
void finish_engine(Estimate& est, bool engine_starts, std::string rule_note, bool paged = true);

}  // namespace kvprof::estimate
