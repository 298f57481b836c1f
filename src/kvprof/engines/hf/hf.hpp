// HF transformers (eager generate()), as the engine registry (engines/registry.hpp) calls it:
// its memory plan. It has no startup log or /metrics kvprof reads.
#pragma once

#include "kvprof/estimate/estimate.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::engines {

// Weights + KV for batch x sequence + the prefill's peak activations + framework overhead.
Expected<estimate::Estimate> estimate_hf(const estimate::EstimateInput& input);

}  // namespace kvprof::engines
