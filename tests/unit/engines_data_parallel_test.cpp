// Data and expert parallel deployments of MoE models, per GPU: vLLM's experts over tp x dp
// (whole experts with --enable-expert-parallel, each expert's matrices without), SGLang's DP
// attention (attention replicas inside the tp GPUs, each with all its KV heads) and --ep-size.
// Figures against the public startups are in tests/fixtures/sglang_versions/v0.5.3.jsonl.
#include <gtest/gtest.h>

#include "kvprof/engines/registry.hpp"
#include "kvprof/model/catalog.hpp"
#include "support/run_kvprof.hpp"

namespace kvprof::engines {
namespace {

using estimate::EstimateInput;

EstimateInput moe_input(Engine engine) {
  EstimateInput in;
  in.model = model::catalog_model("Qwen/Qwen3-30B-A3B").value();
  in.gpu = gpu::find_gpu("H200").value();
  in.settings.engine = engine;
  in.settings.max_model_len = 32768;
  return in;
}

estimate::Estimate plan_of(const EstimateInput& in) {
  auto est = plan(in);
  EXPECT_TRUE(est.has_value()) << (est ? "" : est.error().message);
  return est ? *est : estimate::Estimate{};
}

// vLLM's FusedMoEParallelConfig: the experts' group is every GPU of the deployment.
TEST(DataParallel, VllmSplitsTheExpertsOverEveryGpuWithOrWithoutExpertParallel) {
  auto in = moe_input(Engine::vllm);
  const auto one = plan_of(in).weights;
  in.settings.data_parallel_size = 4;
  const auto dp = plan_of(in).weights;
  // Plain DP: each expert's matrices over 4 GPUs, attention whole on each (its TP is 1).
  EXPECT_EQ(dp.expert_bytes * 4, one.expert_bytes);
  EXPECT_EQ(dp.attention_bytes, one.attention_bytes);
  EXPECT_EQ(dp.embedding_bytes, one.embedding_bytes);
  in.settings.enable_expert_parallel = true;
  const auto ep = plan_of(in).weights;
  // With EP: 32 whole experts of 128 per GPU; the same bytes, as 128 divides evenly.
  EXPECT_EQ(ep.expert_bytes * 4, one.expert_bytes);
  // Each DP rank has its own KV pool sized by its own TP group: all four KV heads per GPU.
  const auto est = plan_of(in);
  EXPECT_EQ(est.kv_bytes_per_token, 48U * 4 * 128 * 2 * 2);
  EXPECT_EQ(est.gpus_total, 4U);
}

TEST(DataParallel, SglangDpAttentionKeepsEveryKvHeadOnEachGpu) {
  auto in = moe_input(Engine::sglang);
  in.settings.gpu_memory_utilization = 0.8;
  in.settings.tensor_parallel_size = 4;
  const auto tp = plan_of(in);
  in.settings.data_parallel_size = 4;
  in.settings.enable_dp_attention = true;
  in.settings.expert_parallel_size = 4;
  const auto dpa = plan_of(in);
  // attn_tp_size = tp / dp = 1: the whole attention and the 4 KV heads on each GPU, a quarter of
  // the tokens for the same bytes; the dp replicas live inside the 4 GPUs.
  EXPECT_EQ(tp.kv_bytes_per_token * 4, dpa.kv_bytes_per_token);
  EXPECT_EQ(dpa.weights.attention_bytes, 4 * tp.weights.attention_bytes);
  EXPECT_EQ(dpa.gpus_total, 4U);
  // The embedding is replicated under DP attention; the LM head stays over the 4 GPUs unless
  // --enable-dp-lm-head.
  EXPECT_EQ(dpa.weights.embedding_bytes, 4 * tp.weights.embedding_bytes);
  EXPECT_EQ(dpa.weights.lm_head_bytes, tp.weights.lm_head_bytes);
  in.settings.enable_dp_lm_head = true;
  EXPECT_EQ(plan_of(in).weights.lm_head_bytes, 4 * tp.weights.lm_head_bytes);
  // Whole experts over --ep-size 4 are the same bytes as 4-way TP inside each.
  EXPECT_EQ(dpa.weights.expert_bytes, tp.weights.expert_bytes);
  EXPECT_LT(dpa.engine_report.kv_cache_tokens * 3, tp.engine_report.kv_cache_tokens);
}

TEST(DataParallel, SglangExpertParallelBelowTpSplitsInsideEachExpert) {
  auto in = moe_input(Engine::sglang);
  in.settings.tensor_parallel_size = 8;
  const auto tp8 = plan_of(in).weights;
  in.settings.expert_parallel_size = 2;  // moe_tp_size = 8 / 2 = 4: 64 experts, each over 4 GPUs
  const auto ep2 = plan_of(in).weights;
  EXPECT_EQ(ep2.expert_bytes, tp8.expert_bytes);
  in.settings.expert_parallel_size = 1;
  in.settings.moe_dense_tp_size = 1;  // no dense layers in Qwen3-30B-A3B: nothing moves
  EXPECT_EQ(plan_of(in).weights.total_bytes, tp8.total_bytes);
}

TEST(DataParallel, SglangCommandWithDpAttentionIsReadAsSglangPlansIt) {
  const auto r = read_launch_command(
      "SGLANG_DEEPEP_BF16_DISPATCH=1 python3 -m sglang.launch_server --model /m --tp-size 4 "
      "--ep-size 4 --dp-size 4 --enable-dp-lm-head --moe-dense-tp-size 1 --enable-dp-attention "
      "--moe-a2a-backend deepep --mem-fraction-static 0.8");
  ASSERT_TRUE(r.has_value());
  const auto& s = r->settings;
  EXPECT_EQ(s.engine, Engine::sglang);
  EXPECT_EQ(s.tensor_parallel_size, 4U);
  EXPECT_EQ(s.data_parallel_size, 4U);
  EXPECT_TRUE(s.enable_dp_attention);
  EXPECT_EQ(s.expert_parallel_size, 4U);
  EXPECT_TRUE(s.enable_expert_parallel);  // deepep: ep_size = tp_size
  EXPECT_TRUE(s.enable_dp_lm_head);
  EXPECT_EQ(s.moe_dense_tp_size, 1U);
  const auto other = read_launch_command(
      "python -m sglang.launch_server --model /m --tp 2 "
      "--moe-a2a-backend none");
  ASSERT_TRUE(other.has_value());
  EXPECT_FALSE(other->settings.enable_expert_parallel);
}

// vllm-project/recipes#12 (2025-08-04, vLLM v0.10.1.dev101): Qwen3-Coder-480B-A35B FP8 on 8
// GPUs of 139.8 GiB (the two runs' KV memory differ by 6.99 GiB for 0.05 of the fraction: the
// 141 GB H20), -dp=8 --enable-expert-parallel, the model's 262,144 tokens. Each rank refused to
// start: "62.00 GiB KV cache is needed, which is larger than the available KV cache memory
// (48.66 GiB)" (55.65 GiB at --gpu-memory-utilization 0.95), "the estimated maximum model length
// is 205728" (235296). The KV a token takes is exact (every KV head on each rank); the memory
// left for it is 3.6-4.2% under (5.1-5.8% over before the MoE layers' gather of all 8 ranks'
// tokens in the profile run was planned).
TEST(DataParallel, AVllmDpEpStartupRefusesAsItsRanksDid) {
  EstimateInput in;
  in.model = model::catalog_model("Qwen/Qwen3-Coder-480B-A35B-Instruct").value();
  in.gpu = gpu::find_gpu("H20-3E").value();
  in.settings.engine = Engine::vllm;
  in.settings.engine_version = "v0.10";
  in.settings.quantization = "fp8-block";
  in.settings.data_parallel_size = 8;
  in.settings.enable_expert_parallel = true;
  for (const auto& [fraction, logged_gib] : {std::pair{0.9, 48.66}, std::pair{0.95, 55.65}}) {
    in.settings.gpu_memory_utilization = fraction;
    const auto est = plan_of(in);
    EXPECT_EQ(est.kv_bytes_per_token, 62U * 8 * 128 * 2 * 2);
    EXPECT_EQ(est.kv_bytes_per_token * 262144, 62ULL << 30);  // "62.00 GiB KV cache is needed"
    EXPECT_EQ(est.verdict, estimate::Verdict::does_not_start) << fraction;
    EXPECT_EQ(est.start_failure, "KV cache allocation");
    const double available_gib = static_cast<double>(est.engine_report.available_kv_cache_bytes) /
                                 static_cast<double>(1ULL << 30);
    EXPECT_NEAR(available_gib, logged_gib, logged_gib * 0.045) << fraction;
    EXPECT_LT(available_gib, logged_gib) << fraction;  // the gathered tokens' workspaces
  }
}

TEST(DataParallel, ThePlanSaysEveryRankPrintsTheLines) {
  const auto r = test::run_kvprof(
      "estimate -m Qwen/Qwen3-30B-A3B --gpu H100 --dp 4 --enable-expert-parallel "
      "--max-model-len 32768");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("will log on each of its 4 data-parallel ranks (DP0 - DP3):"),
            std::string::npos)
      << r.out;
  const auto bad = test::run_kvprof(
      "estimate -m Qwen/Qwen3-30B-A3B --engine sglang --gpu H100 --tp 4 --dp 3 "
      "--enable-dp-attention");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.out.find("--dp-size 3 must be 2 or more and divide --tp-size 4"), std::string::npos)
      << bad.out;
  const auto vllm = test::run_kvprof(
      "estimate -m Qwen/Qwen3-30B-A3B --gpu H100 --tp 4 --dp 4 --enable-dp-attention");
  EXPECT_EQ(vllm.rc, 2);
  EXPECT_NE(vllm.out.find("are SGLang's"), std::string::npos) << vllm.out;
}

}  // namespace
}  // namespace kvprof::engines
