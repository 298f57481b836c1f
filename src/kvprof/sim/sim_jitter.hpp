// Engine behaviour the planner does not know exactly, for the SIMULATED server: a seeded draw of
// the non-torch memory, the profile-run activation peak, the CUDA graph pool and the caching
// allocator's fragmentation, each within bounds taken from real vLLM startups (see
// docs/architecture.md, "sim/"), so a simulated run compared with the plan that sized it shows
// the planner's error on that setup instead of 0%.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "kvprof/estimate/result.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::sim {

struct SimConfig;

// A closed range a factor (or a fraction) is drawn from, uniformly.
struct JitterBounds {
  double lo = 1.0;
  double hi = 1.0;
};

// vLLM v0.19 on H100 at TP1 (tests/fixtures/vllm_startup_public.jsonl, 22 single-GPU records):
// non-torch forward increase 0.24-0.46 GiB where the plan says 0.25 GiB.
inline constexpr JitterBounds k_non_torch_factor{0.96, 1.84};
// The planner's largest activation-peak error over the 29 real startups is 6.6%.
inline constexpr JitterBounds k_activation_factor{0.93, 1.07};
// The planner's largest CUDA graph error over the 29 real startups is 15.7%.
inline constexpr JitterBounds k_cuda_graph_factor{0.84, 1.16};
// Caching-allocator slack on top of the activations while serving, as a fraction of them: not
// in vLLM's figures (they count allocated bytes), so an assumption, kept small.
inline constexpr JitterBounds k_fragmentation{0.0, 0.10};

struct EngineJitter {
  uint64_t seed = 0;
  double non_torch_factor = 1.0;
  double activation_factor = 1.0;
  double cuda_graph_factor = 1.0;
  double fragmentation = 0.0;  // fraction of the activation bytes
};

// The jitter of `seed`: the same on every machine for the same seed (its own generator, not the
// library's distributions).
EngineJitter draw_engine_jitter(uint64_t seed);

// A seed for a run that was given none (from the system's random device).
uint64_t fresh_jitter_seed();

// Re-sizes `config` (already sized from `est` by apply_estimate) as an engine with `jitter`
// would size itself: its non-torch, activation and graph memory, and the KV blocks that its
// profile run leaves (available memory less the extra non-torch and activation, over the bytes
// per block). Returns a usage error when no block is left.
Expected<void> apply_engine_jitter(const estimate::Estimate& est, const EngineJitter& jitter,
                                   SimConfig& config);

// {"seed", each factor, "bounds": {...}} for summary.json.
nlohmann::json jitter_json(const EngineJitter& jitter);

}  // namespace kvprof::sim
