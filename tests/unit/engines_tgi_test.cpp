// TGI (text-generation-inference): its releases' rules, its warmup plan, its startup lines (real
// logs in tests/fixtures/tgi_logs/, sources in their README) and its launcher's command. The
// plan against public startups is held in analysis_engine_versions_test.cpp
// (tests/fixtures/tgi_versions/).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/engines/tgi/releases.hpp"
#include "kvprof/model/catalog.hpp"
#include "support/run_kvprof.hpp"

namespace kvprof::engines {
namespace {

std::string read_fixture(const std::string& name) {
  std::ifstream in(std::string(KVPROF_FIXTURES_DIR) + "/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

estimate::EstimateInput tgi_input(const char* model, const char* gpu, const char* release) {
  estimate::EstimateInput in;
  in.model = model::catalog_model(model).value();
  in.gpu = gpu::find_gpu(gpu).value();
  in.settings.engine = Engine::tgi;
  in.settings.engine_version = release;
  return in;
}

TEST(TgiReleases, EachTagFindsTheRowThatCoversIt) {
  const auto name = [](const char* v) { return std::string(parse_tgi_release(v).value()->name); };
  EXPECT_EQ(name("1.0.3"), "v1.0");
  EXPECT_EQ(name("v1.4.0"), "v1.2");
  EXPECT_EQ(name("1.4.1"), "v1.4.1");
  EXPECT_EQ(name("2.2.0"), "v2.0");
  EXPECT_EQ(name("2.4.0"), "v2.4.0");
  EXPECT_EQ(name("2.4.1"), "v2.4.1");
  EXPECT_EQ(name("3.2.3"), "v3.1");
  EXPECT_EQ(name("3.3.7"), "v3.3");
  EXPECT_EQ(name(""), "v3.3");
  EXPECT_FALSE(parse_tgi_release("0.9.4").has_value());
  EXPECT_FALSE(parse_tgi_release("4.0").has_value());
  EXPECT_FALSE(parse_tgi_release("sha-6c4496a").has_value());
  const auto rows = tgi_releases();
  EXPECT_EQ(rows.back().wiggle_room, 0.90);  // globals.py of v3.3
}

// The v3 launcher's default prefill: min(the card's fp16 flops x shards / the model's flops per
// token, max positions, its VRAM estimate); an unknown card falls back to 4096 (Gemma 3: 8000,
// as the A6000 startup in tests/fixtures/tgi_logs/ logs it).
TEST(TgiReleases, V3DefaultPrefillFollowsTheCardsFlops) {
  const auto& v33 = *parse_tgi_release("3.3").value();
  const auto llama = model::catalog_model("meta-llama/Llama-3.1-8B-Instruct").value();
  EXPECT_EQ(tgi_v3_default_prefill_tokens(v33, llama, *gpu::find_gpu("H100"), 1, 1.0), 59870U);
  EXPECT_EQ(tgi_v3_default_prefill_tokens(v33, llama, *gpu::find_gpu("H200"), 1, 1.0), 65791U);
  EXPECT_EQ(tgi_v3_default_prefill_tokens(v33, llama, *gpu::find_gpu("B200"), 1, 1.0), 4096U);
  const auto gemma = model::catalog_model("google/gemma-3-27b-it").value();
  EXPECT_EQ(tgi_v3_default_prefill_tokens(v33, gemma, *gpu::find_gpu("RTX-A6000"), 2, 1.0), 8000U);
  // H200 is in the table from v3.1 on.
  const auto& v30 = *parse_tgi_release("3.0.1").value();
  EXPECT_EQ(tgi_v3_default_prefill_tokens(v30, llama, *gpu::find_gpu("H200"), 1, 1.0), 4096U);
}

TEST(TgiPlan, V2DefaultsAndTheLinesTgiPrints) {
  const auto est = plan(tgi_input("meta-llama/Llama-3.1-8B-Instruct", "A10G", "2.2.0")).value();
  const auto& lines = est.engine_report.log_lines;
  ASSERT_GE(lines.size(), 5U);
  EXPECT_EQ(lines[0], "Default `max_input_tokens` to 4095");
  EXPECT_EQ(lines[1], "Default `max_total_tokens` to 4096");
  EXPECT_EQ(lines[2], "Default `max_batch_prefill_tokens` to 4145");
  EXPECT_EQ(lines[3], "Using default cuda graphs [1, 2, 4, 8, 16, 32]");
  EXPECT_TRUE(lines.back().starts_with("Setting max batch total tokens to "));
  EXPECT_EQ(est.engine_report.block_size, 16U);  // paged attention before v2.3
  EXPECT_EQ(est.engine_report.max_model_len, 4096U);
  EXPECT_EQ(est.engine_report.kv_cache_tokens % 16, 0U);
  EXPECT_EQ(est.settings.engine_version, "v2.0");
  EXPECT_EQ(est.engine_report.cuda_graphs, 6U);
  // --cuda-graphs 1,2,4: three graphs, and no "default" line.
  auto fewer = tgi_input("meta-llama/Llama-3.1-8B-Instruct", "A10G", "2.2.0");
  fewer.settings.cuda_graph_max_bs = 4;
  const auto three = plan(fewer).value();
  EXPECT_EQ(three.engine_report.cuda_graphs, 3U);
  for (const auto& l : three.engine_report.log_lines)
    EXPECT_FALSE(l.starts_with("Using default cuda graphs")) << l;
}

TEST(TgiPlan, V3PicksItsLimitsAfterTheWarmupAndLogsThem) {
  const auto est = plan(tgi_input("meta-llama/Llama-3.1-8B-Instruct", "H100", "3.3.0")).value();
  const auto& rep = est.engine_report;
  EXPECT_EQ(rep.block_size, 1U);  // flashinfer
  EXPECT_EQ(rep.max_num_batched_tokens, 59870U);
  // With prefill chunking the total is the cache's tokens, capped by the model's positions.
  EXPECT_EQ(rep.max_model_len, 131072U);
  EXPECT_EQ(rep.log_lines.back(), "Maximum total tokens defaulted to 131072");
  bool blocks_line = false;
  for (const auto& l : rep.log_lines)
    blocks_line =
        blocks_line || l == fmt::format("KV-cache blocks: {}, size: 1", rep.num_gpu_blocks);
  EXPECT_TRUE(blocks_line);
}

TEST(TgiPlan, AHalfSizeFractionLeavesLessAndATooLargePrefillStopsTheWarmup) {
  auto in = tgi_input("meta-llama/Llama-3.1-8B-Instruct", "H100", "2.4.0");
  const auto full = plan(in).value();
  in.settings.gpu_memory_utilization = 0.5;
  const auto half = plan(in).value();
  EXPECT_LT(half.engine_report.kv_cache_tokens * 2, full.engine_report.kv_cache_tokens);
  in.settings.gpu_memory_utilization.reset();
  in.settings.max_input_tokens = 200000;
  in.settings.max_model_len = 200001;
  in.settings.max_num_batched_tokens = 200000;
  const auto big = plan(in).value();
  EXPECT_EQ(big.verdict, estimate::Verdict::does_not_start);
  ASSERT_FALSE(big.warnings.empty());
  EXPECT_NE(big.warnings.back().find("Not enough memory to handle 200000 prefill tokens"),
            std::string::npos);
}

// TGI's runtime quantization names: int8 weights for bitsandbytes and eetq, 4-bit for
// bitsandbytes-nf4; bitsandbytes turns CUDA graphs off, as its launcher logs.
TEST(TgiPlan, ItsQuantizeNamesAreTheWeightsTheyLeave) {
  auto in = tgi_input("meta-llama/Llama-3.1-8B-Instruct", "A10G", "2.2.0");
  const auto bf16 = plan(in).value();
  in.settings.quantization = "bitsandbytes";
  const auto int8 = plan(in).value();
  EXPECT_LT(int8.per_gpu.weights_bytes * 10, bf16.per_gpu.weights_bytes * 6);
  EXPECT_EQ(int8.per_gpu.cuda_graph_bytes, 0U);
  bool said = false;
  for (const auto& l : int8.engine_report.log_lines)
    said = said || l == "Bitsandbytes doesn't work with cuda graphs, deactivating them";
  EXPECT_TRUE(said);
  in.settings.quantization = "eetq";
  const auto eetq = plan(in).value();
  EXPECT_EQ(eetq.per_gpu.weights_bytes, int8.per_gpu.weights_bytes);
  EXPECT_GT(eetq.per_gpu.cuda_graph_bytes, 0U);
  in.settings.quantization = "bitsandbytes-nf4";
  const auto nf4 = plan(in).value();
  EXPECT_LT(nf4.per_gpu.weights_bytes, int8.per_gpu.weights_bytes);
  EXPECT_GT(nf4.engine_report.kv_cache_tokens, int8.engine_report.kv_cache_tokens);
}

TEST(EngineLogTgi, V2StartupGivesTheRoutersTokensAndTheGraphs) {
  const auto r = enginelog::parse_engine_log(read_fixture("tgi_logs/v2.2.0_a10g_llama31_8b.log"),
                                             log_parse_options());
  EXPECT_EQ(r.engine, Engine::tgi);
  ASSERT_TRUE(r.settings.kv_cache_tokens);
  EXPECT_EQ(r.settings.kv_cache_tokens->value, 19056U);
  ASSERT_TRUE(r.settings.cuda_graphs);
  EXPECT_EQ(r.settings.cuda_graphs->value, 6U);
  EXPECT_FALSE(r.settings.num_gpu_blocks);  // no "KV-cache blocks" line before v2.4.0
}

TEST(EngineLogTgi, V3StartupGivesTheBlocksOfRankZeroAndTheRoutersLeast) {
  const auto r = enginelog::parse_engine_log(read_fixture("tgi_logs/v3.3_a6000x2_gemma3_27b.log"),
                                             log_parse_options());
  EXPECT_EQ(r.engine, Engine::tgi);
  ASSERT_TRUE(r.settings.num_gpu_blocks);
  EXPECT_EQ(r.settings.num_gpu_blocks->value, 52719U);
  EXPECT_EQ(r.settings.kv_cache_tokens->value, 52125U);
  const auto version = enginelog::parse_engine_log("text-generation-launcher 3.3.4\n",
                                                   log_parse_options(Engine::tgi));
  ASSERT_TRUE(version.version);
  EXPECT_EQ(version.version->value, "3.3.4");
}

TEST(TgiCommand, LauncherFlagsAndTheImageTagAreRead) {
  const auto r = read_launch_command(
      "text-generation-launcher --model-id meta-llama/Llama-3.1-70B-Instruct --num-shard 2 "
      "--max-input-tokens 9999 --max-total-tokens=10000 --max-batch-prefill-tokens 10049 "
      "--cuda-memory-fraction 0.9 --kv-cache-dtype fp8_e4m3fn --cuda-graphs 1,2,4");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->program, "text-generation-launcher");
  EXPECT_EQ(r->model, "meta-llama/Llama-3.1-70B-Instruct");
  const auto& s = r->settings;
  EXPECT_EQ(s.engine, Engine::tgi);
  EXPECT_EQ(s.tensor_parallel_size, 2U);
  EXPECT_EQ(s.max_input_tokens, 9999U);
  EXPECT_EQ(s.max_model_len, 10000U);
  EXPECT_EQ(s.max_num_batched_tokens, 10049U);
  EXPECT_EQ(s.gpu_memory_utilization, 0.9);
  EXPECT_EQ(s.kv_cache_dtype, estimate::KvCacheDtype::fp8_e4m3);
  EXPECT_EQ(s.cuda_graph_max_bs, 4U);
  EXPECT_FALSE(s.enforce_eager);
  const auto docker = read_launch_command(
      "docker run --gpus all --shm-size 1g -p 8080:80 -v /data:/data "
      "ghcr.io/huggingface/text-generation-inference:2.2.0 --model-id m --cuda-graphs 0");
  ASSERT_TRUE(docker.has_value());
  EXPECT_EQ(docker->settings.engine, Engine::tgi);
  EXPECT_EQ(docker->settings.engine_version, "2.2.0");
  EXPECT_EQ(docker->model, "m");
  EXPECT_TRUE(docker->settings.enforce_eager);
  const auto latest = read_launch_command(
      "docker run ghcr.io/huggingface/text-generation-inference:latest --model-id m");
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->settings.engine_version, "");
}

TEST(TgiCli, EstimateAndParseLogSpeakTgi) {
  const auto est = test::run_kvprof(
      "estimate --engine tgi --engine-version 2.2.0 -m meta-llama/Llama-3.1-8B-Instruct --gpu "
      "A10G --json");
  ASSERT_EQ(est.rc, 0) << est.out;
  const auto j = nlohmann::json::parse(est.out);
  EXPECT_EQ(j.at("engine"), "tgi");
  const auto log = test::run_kvprof("parse-log --json " + std::string(KVPROF_FIXTURES_DIR) +
                                    "/tgi_logs/v2.2.0_a10g_llama31_8b.log");
  ASSERT_EQ(log.rc, 0) << log.out;
  const auto p = nlohmann::json::parse(log.out);
  EXPECT_EQ(p.at("engine"), "tgi");
  EXPECT_EQ(p.at("settings").at("kv_cache_tokens").at("value"), 19056);
  const auto bad = test::run_kvprof(
      "estimate --engine tgi --engine-version 0.9 -m "
      "meta-llama/Llama-3.1-8B-Instruct --gpu A10G");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.out.find("not a modelled TGI release"), std::string::npos) << bad.out;
  const auto limits = test::run_kvprof(
      "estimate --engine tgi -m meta-llama/Llama-3.1-8B-Instruct --gpu A10G --max-input-tokens "
      "4096 --max-total-tokens 4096");
  EXPECT_EQ(limits.rc, 2);
  EXPECT_NE(limits.out.find("`max_input_tokens` must be < `max_total_tokens`"), std::string::npos)
      << limits.out;
}

}  // namespace
}  // namespace kvprof::engines
