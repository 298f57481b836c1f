// TensorRT-LLM, as the engine registry (engines/registry.hpp) calls it: its memory plan (the
// PyTorch backend of trtllm-serve), its releases and the reader of its startup log. It has no
// /metrics kvprof reads.
#pragma once

#include <string>
#include <string_view>

#include "kvprof/enginelog/line_reader.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/metrics/prometheus.hpp"
#include "kvprof/metrics/snapshot.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::engines {

// TensorRT-LLM's KV cache creator for `input`: free_gpu_memory_fraction of what the weights,
// the warm-up and the CUDA graphs leave.
Expected<estimate::Estimate> estimate_trtllm(const estimate::EstimateInput& input);

// "1.x" for "", "latest", "1" or any 1.* release (one rule since 1.0); a usage error otherwise.
Expected<std::string> parse_trtllm_version(std::string_view text);

// The reader of TensorRT-LLM's startup lines: weights, paged KV cache and tokens, CUDA graph
// warm-up per batch size and draft length, its version (PyTorch backend and C++ runtime).
enginelog::LineReader trtllm_log_reader();

}  // namespace kvprof::engines
