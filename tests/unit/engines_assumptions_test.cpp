// plan_device, the one rule for where a plan runs (profile --launch and sweep): the GPU given;
// llama.cpp on the CPU without a catalog GPU here or with -ngl 0; the catalog GPU found here;
// else the fallback, said to be assumed — or, without one, an error naming the engine.
#include "kvprof/engines/assumptions.hpp"

#include <gtest/gtest.h>

namespace kvprof::engines {
namespace {

estimate::EngineSettings settings_of(Engine engine, std::optional<uint32_t> ngl = std::nullopt) {
  estimate::EngineSettings s;
  s.engine = engine;
  s.n_gpu_layers = ngl;
  return s;
}

TEST(PlanDevice, TheGpuGivenWins) {
  const auto d = plan_device(settings_of(Engine::vllm), "A100-80GB", std::nullopt, "H100");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->gpu, "A100-80GB");
  EXPECT_EQ(d->origin, GpuOrigin::given);
}

TEST(PlanDevice, LlamaCppRunsOnTheCpuWithoutACatalogGpuOrWithNglZero) {
  const auto none = plan_device(settings_of(Engine::llamacpp), "", std::nullopt, "H100");
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->gpu, "cpu");
  EXPECT_NE(none->note.find("no GPU found here"), std::string::npos) << none->note;
  const auto odd = plan_device(settings_of(Engine::llamacpp), "", "Some Card 9000", "H100");
  ASSERT_TRUE(odd.has_value());
  EXPECT_EQ(odd->gpu, "cpu");
  EXPECT_NE(odd->note.find("'Some Card 9000' is not in kvprof's GPU catalog"), std::string::npos)
      << odd->note;
  const auto ngl0 =
      plan_device(settings_of(Engine::llamacpp, 0), "", "NVIDIA H100 80GB HBM3", "H100");
  ASSERT_TRUE(ngl0.has_value());
  EXPECT_EQ(ngl0->gpu, "cpu");
  EXPECT_NE(ngl0->note.find("-ngl 0"), std::string::npos);
  const auto offloaded =
      plan_device(settings_of(Engine::llamacpp), "", "NVIDIA H100 80GB HBM3", "");
  ASSERT_TRUE(offloaded.has_value());
  EXPECT_NE(offloaded->gpu, "cpu");
  EXPECT_EQ(offloaded->origin, GpuOrigin::detected);
}

TEST(PlanDevice, AGpuEngineTakesTheGpuFoundElseTheFallbackElseAnError) {
  const auto found = plan_device(settings_of(Engine::vllm), "", "NVIDIA H100 80GB HBM3", "");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->origin, GpuOrigin::detected);
  const auto fallback = plan_device(settings_of(Engine::vllm), "", std::nullopt, "H100");
  ASSERT_TRUE(fallback.has_value());
  EXPECT_EQ(fallback->gpu, "H100");
  EXPECT_EQ(fallback->origin, GpuOrigin::assumed);
  EXPECT_NE(fallback->note.find("planned for an H100"), std::string::npos) << fallback->note;
  const auto none = plan_device(settings_of(Engine::sglang), "", std::nullopt, "");
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().kind, ErrorKind::not_found);
  EXPECT_NE(none.error().message.find("SGLang"), std::string::npos) << none.error().message;
}

}  // namespace
}  // namespace kvprof::engines
