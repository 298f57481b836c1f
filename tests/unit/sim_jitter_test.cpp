// The simulated engine's seeded jitter: the same draw for the same seed, every factor within its
// bounds, and a simulator sized with it holding the KV blocks its own non-torch and activation
// memory leave (not the plan's).
#include "kvprof/sim/sim_jitter.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kvprof/sim/sim_config.hpp"
#include "kvprof/sim/sim_sizing.hpp"

namespace kvprof::sim {
namespace {

void expect_within(double v, JitterBounds b) {
  EXPECT_GE(v, b.lo);
  EXPECT_LE(v, b.hi);
}

TEST(SimJitter, SameSeedSameDrawEveryFactorWithinItsBounds) {
  std::set<double> seen;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const EngineJitter a = draw_engine_jitter(seed);
    const EngineJitter b = draw_engine_jitter(seed);
    EXPECT_EQ(a.non_torch_factor, b.non_torch_factor);
    EXPECT_EQ(a.activation_factor, b.activation_factor);
    EXPECT_EQ(a.cuda_graph_factor, b.cuda_graph_factor);
    EXPECT_EQ(a.fragmentation, b.fragmentation);
    expect_within(a.non_torch_factor, k_non_torch_factor);
    expect_within(a.activation_factor, k_activation_factor);
    expect_within(a.cuda_graph_factor, k_cuda_graph_factor);
    expect_within(a.fragmentation, k_fragmentation);
    seen.insert(a.activation_factor);
  }
  EXPECT_GT(seen.size(), 190U);  // seeds give different engines
}

TEST(SimJitter, SizesTheBlocksFromTheEnginesOwnProfileRun) {
  SimFlags flags;
  flags.model = "meta-llama/Llama-3.1-8B-Instruct";
  flags.gpu = "H100";
  flags.port = 0;
  auto planned = sim_config_from_flags(flags);
  ASSERT_TRUE(planned.has_value()) << planned.error().message;
  EXPECT_FALSE(planned->jitter);
  auto est = estimate_for_sim(flags);
  ASSERT_TRUE(est.has_value() && est->has_value());
  const auto& e = **est;
  EXPECT_EQ(planned->num_gpu_blocks, e.engine_report.num_gpu_blocks);

  for (uint64_t seed : {3ULL, 11ULL, 12345ULL}) {
    SCOPED_TRACE(seed);
    flags.jitter_seed = seed;
    auto c = sim_config_from_flags(flags);
    ASSERT_TRUE(c.has_value()) << c.error().message;
    ASSERT_TRUE(c->jitter);
    const EngineJitter& j = *c->jitter;
    EXPECT_EQ(j.seed, seed);
    // What the engine's non-torch and activation take beyond the plan leaves the KV cache.
    const double extra =
        (j.non_torch_factor - 1) * static_cast<double>(e.per_gpu.non_torch_bytes) +
        (j.activation_factor - 1) * static_cast<double>(e.per_gpu.activation_bytes);
    const double expected =
        std::floor((static_cast<double>(e.engine_report.available_kv_cache_bytes) - extra) /
                   static_cast<double>(planned->kv_bytes_per_block));
    EXPECT_NEAR(c->num_gpu_blocks, expected, 1.0);
    EXPECT_NEAR(static_cast<double>(c->cuda_graph_bytes),
                j.cuda_graph_factor * static_cast<double>(e.per_gpu.cuda_graph_bytes),
                static_cast<double>(c->cuda_graph_bytes) * 0.01);
    EXPECT_NE(c->sizing.find("engine jitter seed " + std::to_string(seed)), std::string::npos);
    // Reproducible: the same seed sizes the same server.
    auto again = sim_config_from_flags(flags);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->num_gpu_blocks, c->num_gpu_blocks);
    EXPECT_EQ(again->non_torch_bytes, c->non_torch_bytes);
    EXPECT_EQ(again->activation_bytes_per_token, c->activation_bytes_per_token);
  }
}

TEST(SimJitter, GpuMemoryUtilizationSizesFewerBlocks) {
  SimFlags flags;
  flags.model = "meta-llama/Llama-3.1-8B-Instruct";
  flags.gpu = "H100";
  flags.port = 0;
  auto at_090 = sim_config_from_flags(flags);
  flags.gpu_memory_utilization = 0.8;
  auto at_080 = sim_config_from_flags(flags);
  ASSERT_TRUE(at_090.has_value() && at_080.has_value());
  // 10% of the GPU less for the KV cache, in blocks.
  const double gone = 0.1 * static_cast<double>(at_090->total_bytes) /
                      static_cast<double>(at_090->kv_bytes_per_block);
  EXPECT_NEAR(static_cast<double>(at_090->num_gpu_blocks) - at_080->num_gpu_blocks, gone, 2.0);
}

}  // namespace
}  // namespace kvprof::sim
