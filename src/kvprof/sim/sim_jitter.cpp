// Seeded engine jitter of the simulated server (see sim_jitter.hpp).
#include "kvprof/sim/sim_jitter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kvprof/sim/sim_config.hpp"

namespace kvprof::sim {

namespace {

// Uniform in [b.lo, b.hi] from the top 53 bits of one draw: the same values everywhere.
double draw(std::mt19937_64& gen, JitterBounds b) {
  const double unit = static_cast<double>(gen() >> 11) * 0x1.0p-53;
  return b.lo + (b.hi - b.lo) * unit;
}

nlohmann::json bounds_json(JitterBounds b) {
  return nlohmann::json::array({b.lo, b.hi});
}

}  // namespace

EngineJitter draw_engine_jitter(uint64_t seed) {
  std::mt19937_64 gen(seed);
  EngineJitter j;
  j.seed = seed;
  j.non_torch_factor = draw(gen, k_non_torch_factor);
  j.activation_factor = draw(gen, k_activation_factor);
  j.cuda_graph_factor = draw(gen, k_cuda_graph_factor);
  j.fragmentation = draw(gen, k_fragmentation);
  return j;
}

uint64_t fresh_jitter_seed() {
  std::random_device rd;
  // Small enough to type back in; never 0 so a seed always reads as one.
  return uint64_t{rd()} % 1000000 + 1;
}

Expected<void> apply_engine_jitter(const estimate::Estimate& est, const EngineJitter& j,
                                   SimConfig& c) {
  const auto& mem = est.per_gpu;
  const auto& r = est.engine_report;
  const auto scaled = [](uint64_t bytes, double factor) {
    return static_cast<uint64_t>(std::llround(static_cast<double>(bytes) * factor));
  };
  const uint64_t non_torch = scaled(mem.non_torch_bytes, j.non_torch_factor);
  const uint64_t activation = scaled(mem.activation_bytes, j.activation_factor);
  // vLLM's profile run sees the engine's own non-torch and activation peak: what they take
  // beyond the plan comes out of the KV cache.
  const double available =
      static_cast<double>(r.available_kv_cache_bytes) -
      (static_cast<double>(non_torch) - static_cast<double>(mem.non_torch_bytes)) -
      (static_cast<double>(activation) - static_cast<double>(mem.activation_bytes));
  const double blocks = std::floor(available / static_cast<double>(c.kv_bytes_per_block));
  if (blocks < 1) {
    return fail(ErrorKind::usage,
                fmt::format("engine jitter (seed {}) leaves no KV cache block", j.seed));
  }
  c.num_gpu_blocks = static_cast<uint32_t>(std::min<double>(blocks, 1U << 26));
  const uint64_t capacity_tokens = uint64_t{c.num_gpu_blocks} * c.block_size;
  c.max_model_len = static_cast<uint32_t>(std::min<uint64_t>(c.max_model_len, capacity_tokens));
  c.non_torch_bytes = non_torch + mem.cuda_context_bytes;
  c.cuda_graph_bytes = scaled(mem.cuda_graph_bytes, j.cuda_graph_factor);
  // Graphs are captured after the KV cache is allocated (vLLM v0.19): no effect on the blocks.
  // Fragmentation: the allocator holds more than the activations it hands out while serving.
  c.activation_bytes_per_token =
      scaled(activation, 1.0 + j.fragmentation) / std::max(1U, c.max_num_batched_tokens);
  c.sizing += fmt::format(", engine jitter seed {}", j.seed);
  return {};
}

nlohmann::json jitter_json(const EngineJitter& j) {
  return {{"seed", j.seed},
          {"non_torch_factor", j.non_torch_factor},
          {"activation_factor", j.activation_factor},
          {"cuda_graph_factor", j.cuda_graph_factor},
          {"fragmentation_fraction", j.fragmentation},
          {"bounds",
           {{"non_torch_factor", bounds_json(k_non_torch_factor)},
            {"activation_factor", bounds_json(k_activation_factor)},
            {"cuda_graph_factor", bounds_json(k_cuda_graph_factor)},
            {"fragmentation_fraction", bounds_json(k_fragmentation)}}},
          {"source",
           "bounds from real vLLM v0.19 H100 startups: non-torch 0.24-0.46 GiB at TP1, the "
           "planner's largest activation (6.6%) and CUDA graph (15.7%) errors; fragmentation is "
           "an assumption (vLLM's figures count allocated bytes)"}};
}

}  // namespace kvprof::sim
