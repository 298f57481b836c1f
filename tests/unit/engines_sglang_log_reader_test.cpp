// Tests of the SGLang log parser on real lines quoted in public SGLang reports (cited).
#include <gtest/gtest.h>

#include <string>

#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/registry.hpp"
#include "support/printed_sizes.hpp"

namespace kvprof::enginelog {
namespace {

using kvprof::test::gib_x100;

TEST(EngineLogSglang, WeightsKvAndGraphsPerRank) {
  const std::string log =
      // https://github.com/sgl-project/sglang/issues/4417
      "[2025-03-14 06:56:42 TP1] Load weight end. type=DeepseekV3ForCausalLM, "
      "dtype=torch.bfloat16, avail mem=35.52 GB, mem usage=40.46 GB.\n"
      "[2025-03-14 06:56:46 TP0] Memory pool end. avail mem=16.08 GB\n"
      // https://github.com/sgl-project/sglang/pull/11716
      "[2025-10-16 09:06:22 TP1] KV Cache is allocated. #tokens: 2795207, K size: 53.31 GB, V "
      "size: 53.31 GB\n"
      // https://github.com/sgl-project/sglang/pull/12978
      "[2025-11-10 19:59:09 TP1] Capture cuda graph end. Time elapsed: 11.35 s. mem usage=1.04 "
      "GB. avail mem=11.22 GB.\n"
      // https://github.com/sgl-project/sglang/pull/17499 (the DP + TP tag)
      "[2026-01-21 19:39:12 DP0 TP1] Ignore import error when loading "
      "sglang.srt.models.nemotron_h: No module named 'cuda'\n";
  const auto r = parse_engine_log(log, engines::log_parse_options());
  EXPECT_EQ(r.engine, engines::Engine::sglang);
  ASSERT_EQ(r.figures.size(), 5U);
  EXPECT_EQ(r.figures[0].component, Component::weights);
  EXPECT_EQ(r.figures[0].device, "TP1");
  EXPECT_EQ(r.figures[0].size.bytes, gib_x100(4046));
  EXPECT_EQ(r.figures[0].size.text, "40.46 GB");
  EXPECT_EQ(r.figures[1].component, Component::kv_cache);
  EXPECT_EQ(r.figures[1].size.bytes, 2 * gib_x100(5331));
  EXPECT_EQ(r.figures[2].component, Component::kv_cache_k);
  EXPECT_EQ(r.figures[3].component, Component::kv_cache_v);
  EXPECT_EQ(r.figures[4].component, Component::cuda_graph);
  EXPECT_EQ(r.figures[4].size.bytes, gib_x100(104));
  ASSERT_TRUE(r.settings.kv_cache_tokens);
  EXPECT_EQ(r.settings.kv_cache_tokens->value, 2795207U);
  const auto totals = totals_by_device(r);
  ASSERT_EQ(totals.size(), 1U);
  EXPECT_EQ(totals[0].kv_cache_bytes, 2 * gib_x100(5331));
}

TEST(EngineLogSglang, SingleGpuPrefixIsGpu) {
  // The prefix of https://github.com/sgl-project/sglang/pull/15426 (no rank tag on one GPU);
  // the second line is rendered from the "Load weight end." format, not quoted.
  const auto r = parse_engine_log(
      "[2025-12-23 14:18:01] Load weight begin. avail mem=46.81 GB\n"
      "[2025-12-23 14:18:05] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail "
      "mem=31.73 GB, mem usage=15.08 GB.\n",
      engines::log_parse_options());
  EXPECT_EQ(r.engine, engines::Engine::sglang);
  ASSERT_EQ(r.figures.size(), 1U);
  EXPECT_EQ(r.figures[0].device, "GPU");
}

}  // namespace
}  // namespace kvprof::enginelog
