// SGLang releases as rules (estimate/sglang_version.cpp): which row a release reads, the defaults
// each row picks from the GPU's memory and the parallel sizes (server_args.py of that release),
// and the pool the plan builds from them (model_runner.py profile_max_num_token).
#include "kvprof/engines/sglang/releases.hpp"

#include <gtest/gtest.h>

#include "kvprof/engines/registry.hpp"
#include "kvprof/estimate/activations.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/model/catalog.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner the engines build on

namespace {

std::string_view row_of(std::string_view text) {
  auto r = parse_sglang_version(text);
  return r ? (*r)->name : std::string_view("error");
}

const SglangVersionRules& rules(std::string_view name) {
  return **parse_sglang_version(name);
}

SglangDefaults defaults(std::string_view version, uint64_t gpu_mib, uint32_t tp = 1,
                        bool speculative = false) {
  SglangDefaultsInput in;
  in.gpu_memory_mib = gpu_mib;
  in.tp = tp;
  in.speculative = speculative;
  return sglang_defaults(rules(version), in);
}

TEST(SglangVersion, ParsesReleasesToTheRowThatCoversThem) {
  EXPECT_EQ(row_of("0.3.6"), "v0.3");
  EXPECT_EQ(row_of("v0.4.1.post7"), "v0.4");
  EXPECT_EQ(row_of("0.4.5.post2"), "v0.4");
  EXPECT_EQ(row_of("0.4.6.post2"), "v0.4.6");
  EXPECT_EQ(row_of("0.4.7"), "v0.4.6");
  EXPECT_EQ(row_of("0.4.7.post1"), "v0.4.7.post1");
  EXPECT_EQ(row_of("0.4.9.post2"), "v0.4.7.post1");
  EXPECT_EQ(row_of("0.4.9.post3"), "v0.4.9.post3");
  EXPECT_EQ(row_of("0.5.2"), "v0.4.9.post3");
  EXPECT_EQ(row_of("0.5.3rc2"), "v0.5.3");
  EXPECT_EQ(row_of("0.5.19"), "v0.5.3");
  EXPECT_EQ(row_of("latest"), "v0.5.3");
  EXPECT_EQ(row_of(""), "v0.5.3");
  for (const auto& v : sglang_versions())
    EXPECT_EQ(row_of(v.name), v.name);
  for (const char* bad : {"0.1.9", "0.6", "1.0", "0.4.x", "abc", "0.4.7.postX"}) {
    auto r = parse_sglang_version(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().kind, ErrorKind::usage);
    EXPECT_NE(r.error().message.find("v0.4.7.post1"), std::string::npos) << r.error().message;
  }
}

TEST(SglangVersion, TheTpTableOfV04) {
  // 80 GB H100 (81,559 MiB as nvidia-smi reports it): 0.88 at TP 1, 0.81 at TP 8 (0.83 in v0.3).
  EXPECT_DOUBLE_EQ(defaults("0.4.1", 81559).mem_fraction_static, 0.88);
  EXPECT_DOUBLE_EQ(defaults("0.4.1", 81559, 8).mem_fraction_static, 0.81);
  EXPECT_DOUBLE_EQ(defaults("0.3.4", 81559, 8).mem_fraction_static, 0.83);
  EXPECT_EQ(defaults("0.4.1", 81559).chunked_prefill_size, 8192U);
  EXPECT_EQ(defaults("0.4.1", 24564).chunked_prefill_size, 2048U);
  EXPECT_EQ(defaults("0.4.1", 24564).cuda_graph_max_bs, 8U);
  EXPECT_EQ(defaults("0.4.1", 24564, 4).cuda_graph_max_bs, 80U);
  // v0.4.6 - v0.4.7: above 96 GiB at least 18 GiB stay out of the pool; B200s take 0.79.
  EXPECT_NEAR(defaults("0.4.7", 143771).mem_fraction_static, (143771.0 - 18 * 1024) / 143771, 1e-9);
  EXPECT_DOUBLE_EQ(defaults("0.4.7", 183359).mem_fraction_static, 0.79);
}

TEST(SglangVersion, TheReserveTiersOfV047Post1) {
  // H100: 9.5 + TP x PP / 2 GiB; 24 GB cards 2.8 + TP x PP / 10; B200 32 GiB.
  EXPECT_DOUBLE_EQ(defaults("0.4.8", 81559).mem_fraction_static, 0.874);
  EXPECT_DOUBLE_EQ(defaults("0.4.8", 81559, 8).mem_fraction_static, 0.831);
  EXPECT_DOUBLE_EQ(defaults("0.4.8", 24564).mem_fraction_static, 0.879);
  EXPECT_DOUBLE_EQ(defaults("0.4.10", 183359, 8).mem_fraction_static, 0.821);
  EXPECT_DOUBLE_EQ(defaults("0.4.8", 81559, 1, true).mem_fraction_static, 0.849);
  EXPECT_EQ(defaults("0.4.8", 143771).cuda_graph_max_bs, 256U);
  EXPECT_EQ(defaults("0.4.8", 183359).cuda_graph_max_bs, 512U);
  EXPECT_EQ(defaults("0.4.8", 183359).chunked_prefill_size, 16384U);
}

TEST(SglangVersion, TheReserveFormulaOfV053) {
  // 512 + 8192 x 1.5 + 256 x 2 + 1/8 GiB = 13,440 MiB on an H100 at TP 1.
  EXPECT_DOUBLE_EQ(defaults("0.5.3", 81559).mem_fraction_static, 0.835);
  EXPECT_EQ(defaults("0.5.3", 81559).cuda_graph_max_bs, 256U);
  EXPECT_EQ(defaults("0.5.3", 81559, 8).cuda_graph_max_bs, 512U);
  // L40S: 4096-token chunks, 32 graphs: 512 + 6144 + 64 + 128 = 6,848 MiB.
  EXPECT_EQ(defaults("0.5.3", 46068).chunked_prefill_size, 4096U);
  EXPECT_DOUBLE_EQ(defaults("0.5.3", 46068).mem_fraction_static, 0.851);
  // A given --chunked-prefill-size is what the reserve is computed from.
  SglangDefaultsInput in;
  in.gpu_memory_mib = 81559;
  in.chunked_prefill_size = 16384;
  const auto big = sglang_defaults(rules("0.5.3"), in);
  EXPECT_EQ(big.chunked_prefill_size, 16384U);
  EXPECT_DOUBLE_EQ(big.mem_fraction_static, 0.685);
}

TEST(SglangVersion, AVisionTowerLowersTheFractionFromV049Post3) {
  SglangDefaultsInput in;
  in.gpu_memory_mib = 81559;
  in.vision_layers = 32;
  in.vision_hidden_size = 1280;
  // 32 x 1280^2 is 2.08 ViT-L/14s: x 0.95 x (1 - 0.108).
  const double expected =
      0.835 * 0.95 * (1 - 0.1 * (32.0 * 1280 * 1280 / (24.0 * 1024 * 1024) - 1));
  EXPECT_NEAR(sglang_defaults(rules("0.5.3"), in).mem_fraction_static, expected, 1e-9);
  EXPECT_DOUBLE_EQ(sglang_defaults(rules("0.4.8"), in).mem_fraction_static, 0.874);
}

TEST(SglangVersion, ThePlanSizesThePoolFromTheFreeMemoryBeforeTheWeights) {
  EstimateInput in;
  in.model = *model::catalog_model("llama-3.1-8b");
  in.gpu = *gpu::find_gpu("H100");
  in.settings.engine = engines::Engine::sglang;
  in.settings.engine_version = "0.4.1";
  in.settings.max_model_len = 131072;
  const auto est = plan(in).value();
  EXPECT_EQ(est.settings.engine_version, "v0.4");
  EXPECT_DOUBLE_EQ(*est.settings.gpu_memory_utilization, 0.88);
  const double free_before = static_cast<double>(in.gpu.memory_bytes - k_cuda_context_bytes);
  const auto tokens =
      static_cast<uint64_t>(free_before * 0.88 - static_cast<double>(est.per_gpu.weights_bytes)) /
      est.kv_bytes_per_token;
  EXPECT_EQ(est.engine_report.kv_cache_tokens, tokens);
  // Slots: the req_to_token pool (512 per context's worth of tokens, 2048 - 4096).
  EXPECT_EQ(est.engine_report.max_num_seqs, 2048U);
  // A page of 64 tokens rounds the pool down.
  in.settings.block_size = 64;
  EXPECT_EQ(plan(in).value().engine_report.kv_cache_tokens, tokens / 64 * 64);
  // An older release says how far its rules were checked.
  bool said = false;
  for (const auto& w : est.warnings)
    said = said || w.find("kvprof's rules for SGLang v0.4 are") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(SglangPlan, SparseAttentionCachesFp8OnBlackwellInPagesOf64) {
  EstimateInput in;
  in.model = *model::catalog_model("deepseek-v3.2");
  in.settings.engine = engines::Engine::sglang;
  in.settings.tensor_parallel_size = 8;
  in.gpu = *gpu::find_gpu("H200");
  const auto hopper = plan(in).value();
  EXPECT_EQ(hopper.kv_bytes_per_token, 61U * (1152 + 132));  // bf16 on Hopper
  EXPECT_EQ(hopper.engine_report.block_size, 64U);
  EXPECT_EQ(hopper.engine_report.kv_cache_tokens % 64, 0U);
  in.gpu = *gpu::find_gpu("B200");
  EXPECT_EQ(plan(in).value().kv_bytes_per_token, 61U * (656 + 132));  // fp8_ds_mla
}

TEST(EngineVersion, EveryEngineNamesItsModelledRelease) {
  EXPECT_EQ(parse_engine_version(engines::Engine::vllm, "0.10.1").value(), "v0.10");
  EXPECT_EQ(parse_engine_version(engines::Engine::sglang, "0.4.7.post1").value(), "v0.4.7.post1");
  EXPECT_EQ(parse_engine_version(engines::Engine::trtllm, "1.2.1").value(), "1.x");
  EXPECT_EQ(parse_engine_version(engines::Engine::trtllm, "").value(), "1.x");
  EXPECT_FALSE(parse_engine_version(engines::Engine::trtllm, "0.21").has_value());
  EXPECT_EQ(parse_engine_version(engines::Engine::llamacpp, "b5000").value(), "b5000");
  const auto llama = parse_engine_version(engines::Engine::llamacpp, "master");
  ASSERT_FALSE(llama.has_value());
  EXPECT_EQ(llama.error().kind, ErrorKind::usage);
  EngineSettings s;
  s.engine = engines::Engine::sglang;
  EXPECT_EQ(modelled_engine_version(s), "v0.5.3");
  s.engine = engines::Engine::hf;
  EXPECT_EQ(modelled_engine_version(s), "(no version pinned)");
}

}  // namespace
}  // namespace kvprof::engines
