// Sizing the SIMULATED engine like the planner: the KV block pool, scheduler limits and memory
// figures of serve-sim taken from a vLLM estimate of a real model on a real GPU, so the simulated
// server behaves (blocks, preemption, memory) as that deployment would.
#pragma once

#include <optional>
#include <string>

#include "kvprof/estimate/result.hpp"
#include "kvprof/sim/sim_config.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::sim {

// Copies the estimate's engine figures into `config`: num_gpu_blocks, block_size, max_num_seqs,
// max_num_batched_tokens, max_model_len (capped at the KV capacity), GPU total, weights, KV bytes
// per block, CUDA graphs, non-torch + CUDA context, activation bytes per scheduled token.
// Returns a usage error when the estimate left no KV blocks.
Expected<void> apply_estimate(const estimate::Estimate& est, SimConfig& config);

// The vLLM estimate serve-sim uses for `model` on `gpu` with the scheduler flags of `flags`
// (block size, max_num_seqs, max_num_batched_tokens, max_model_len, gpu_memory_utilization);
// nullopt when `model` is not a catalog id or model file (the simulation then uses placeholder
// sizes), an error when it is one but the estimate fails (e.g. the model does not fit).
Expected<std::optional<estimate::Estimate>> estimate_for_sim(const SimFlags& flags);

}  // namespace kvprof::sim
