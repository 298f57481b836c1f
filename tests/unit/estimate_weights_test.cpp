// Weight bytes per rank from configs: parameter counts the publishers state, TP/PP splits,
// quantized layouts.
#include "kvprof/estimate/weights.hpp"

#include <gtest/gtest.h>

#include "kvprof/engines/vllm/budget.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "support/test_data.hpp"

namespace kvprof::estimate {
namespace {

TEST(EstimateWeights, Llama31_8BParameterCountIsExact) {
  const auto m = test::catalog_spec("meta-llama/Llama-3.1-8B-Instruct");
  WeightOptions o;
  o.rope_cache = false;
  const auto w = weights_per_rank(m, o);
  // 8,030,261,248 parameters as published (safetensors metadata), bf16.
  EXPECT_EQ(w.params_total, 8'030'261'248ULL);
  EXPECT_EQ(w.total_bytes, 2 * 8'030'261'248ULL);
}

TEST(EstimateWeights, SparseAttentionModelsCountTheirIndexersExactly) {
  // The checkpoints' tensor tables (DeepSeek-V3.2: 685,396,921,376 parameters with the MTP layer
  // and the fp8 scales; GLM-5.1: 753,864,139,008 with the MTP layer) less what vLLM does not load
  // for the main model: the MTP layer and the scale tensors.
  WeightOptions o;
  o.rope_cache = false;
  EXPECT_EQ(weights_per_rank(test::catalog_spec("deepseek-ai/DeepSeek-V3.2"), o).params_total,
            671'877'944'064ULL);
  EXPECT_EQ(weights_per_rank(test::catalog_spec("zai-org/GLM-5.1"), o).params_total,
            743'911'218'432ULL);
  // Each layer's indexer: wq_b (index heads x dim x q_lora_rank), wk, weights_proj, k_norm.
  const auto glm = test::catalog_spec("zai-org/GLM-5.1");
  auto without = glm;
  without.dsa = {};
  EXPECT_EQ(weights_per_rank(glm, o).params_total - weights_per_rank(without, o).params_total,
            78ULL * (4096 * 2048 + 128 * 6144 + 32 * 6144 + 2 * 128));
}

TEST(EstimateWeights, IgnoreListsNamingNormsAndBiasesLeaveTheLinearLayersQuantized) {
  // GLM-5-FP8's modules_to_not_convert names every layer's norms, router gate and correction
  // bias and the indexer's weights_proj ("indexers_proj"): only those stay in bf16.
  const auto fp8 = test::catalog_spec("zai-org/GLM-5-FP8");
  const auto bf16 = test::catalog_spec("zai-org/GLM-5");
  ASSERT_GT(fp8.quant.ignored_modules.size(), 700U);
  WeightOptions o;
  o.tp = 8;
  o.quant = fp8.quant;
  const auto q = weights_per_rank(fp8, o);
  o.quant = bf16.quant;
  const auto b = weights_per_rank(bf16, o);
  EXPECT_LT(q.total_bytes, b.total_bytes * 55 / 100);
  EXPECT_GT(q.total_bytes, b.total_bytes * 48 / 100);
}

TEST(EstimateWeights, RopeCacheIsMaxPositionsTimesRotaryDim) {
  const auto m = test::catalog_spec("meta-llama/Llama-3.1-8B-Instruct");
  WeightOptions with;
  WeightOptions without;
  without.rope_cache = false;
  EXPECT_EQ(weights_per_rank(m, with).total_bytes - weights_per_rank(m, without).total_bytes,
            131072ULL * 128 * 2);
}

TEST(EstimateWeights, TensorParallelHalvesShardedTensorsOnly) {
  const auto m = test::catalog_spec("meta-llama/Llama-3.1-8B-Instruct");
  WeightOptions tp1;
  tp1.rope_cache = false;
  WeightOptions tp2 = tp1;
  tp2.tp = 2;
  const auto a = weights_per_rank(m, tp1);
  const auto b = weights_per_rank(m, tp2);
  EXPECT_EQ(b.attention_bytes * 2, a.attention_bytes);
  EXPECT_EQ(b.mlp_bytes * 2, a.mlp_bytes);
  EXPECT_EQ(b.embedding_bytes * 2, a.embedding_bytes);
  // Norms are replicated: the rank holds a bit more than half.
  EXPECT_GT(b.total_bytes * 2, a.total_bytes);
  EXPECT_LT(b.total_bytes * 2 - a.total_bytes, 1ULL << 20);
}

TEST(EstimateWeights, PipelineSplitPutsEmbeddingFirstAndHeadLast) {
  const auto m = test::catalog_spec("meta-llama/Llama-3.1-8B-Instruct");
  WeightOptions o;
  o.pp = 2;
  o.pp_rank = 0;
  const auto first = weights_per_rank(m, o);
  o.pp_rank = 1;
  const auto last = weights_per_rank(m, o);
  EXPECT_GT(first.embedding_bytes, 0U);
  EXPECT_EQ(first.lm_head_bytes, 0U);
  EXPECT_EQ(last.embedding_bytes, 0U);
  EXPECT_GT(last.lm_head_bytes, 0U);
  EXPECT_EQ(first.layers_on_rank + last.layers_on_rank, m.n_layer);
}

TEST(EstimateWeights, PipelineRemainderGoesBeforeTheLastRank) {
  // vLLM: 33 layers over 2 stages -> 17 + 16; over 4 stages 8,8,9,8.
  EXPECT_EQ(pp_layer_range(33, 2, 0), std::make_pair(0U, 17U));
  EXPECT_EQ(pp_layer_range(33, 2, 1), std::make_pair(17U, 33U));
  EXPECT_EQ(pp_layer_range(33, 4, 2), std::make_pair(16U, 25U));
  EXPECT_EQ(pp_layer_range(32, 1, 0), std::make_pair(0U, 32U));
}

TEST(EstimateWeights, Int4GroupQuantizationBytes) {
  model::Quantization q;
  q.method = model::QuantMethod::gptq;
  q.weight_bits = 4;
  q.group_size = 128;
  // 4096 x 4096: 8 MiB of nibbles + 32 groups x 4096 rows x 2-byte scales.
  EXPECT_EQ(quantized_linear_bytes(4096, 4096, 1, q, model::DType::f16),
            4096ULL * 4096 / 2 + 32ULL * 4096 * 2);
  q.zero_point = true;
  EXPECT_EQ(quantized_linear_bytes(4096, 4096, 1, q, model::DType::f16),
            4096ULL * 4096 / 2 + 32ULL * 4096 * 2 + 32ULL * 4096 / 2);
}

TEST(EstimateWeights, Fp8BlockScales) {
  model::Quantization q;
  q.method = model::QuantMethod::fp8;
  q.weight_bits = 8;
  q.block_rows = 128;
  q.block_cols = 128;
  EXPECT_EQ(quantized_linear_bytes(7168, 2048, 1, q, model::DType::bf16),
            7168ULL * 2048 + 56ULL * 16 * 4);
}

TEST(EstimateWeights, W8A8CheckpointKeepsEmbeddingsUnquantized) {
  const auto full = test::catalog_spec("meta-llama/Llama-3.1-8B-Instruct");
  const auto w8 = test::catalog_spec("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8");
  WeightOptions o;
  o.rope_cache = false;
  WeightOptions oq = o;
  oq.quant = w8.quant;
  const auto a = weights_per_rank(full, o);
  const auto b = weights_per_rank(w8, oq);
  EXPECT_EQ(a.embedding_bytes, b.embedding_bytes);
  EXPECT_EQ(a.lm_head_bytes, b.lm_head_bytes);
  EXPECT_LT(b.attention_bytes, a.attention_bytes * 51 / 100);
  EXPECT_GT(b.attention_bytes, a.attention_bytes * 49 / 100);
}

TEST(EstimateWeights, MoeExpertsDominateMixtral) {
  const auto m = test::catalog_spec("mistralai/Mixtral-8x7B-v0.1");
  WeightOptions o;
  const auto w = weights_per_rank(m, o);
  EXPECT_NEAR(static_cast<double>(w.params_total) / 1e9, 46.7, 0.3);
  EXPECT_GT(w.expert_bytes, w.total_bytes * 9 / 10);
}

}  // namespace
}  // namespace kvprof::estimate

namespace kvprof::estimate {
namespace {

// vLLM's MXFP4 MoE weights of one expert with intermediate size i and hidden size h, as
// Mxfp4MoEMethod.create_weights allocates them: w13 [2i, h/2] + scales [2i, h/32] + bias [2i]
// bf16, w2 [h, i/2] + scales [h, i/32] + bias [h] bf16.
uint64_t vllm_mxfp4_expert_bytes(uint64_t i, uint64_t h) {
  return 2 * i * h / 2 + 2 * i * h / 32 + 2 * i * 2 + h * i / 2 + h * i / 32 + h * 2;
}

TEST(EstimateWeights, VllmPadsGptOssMxfp4ExpertsPerGpuFamily) {
  const auto m = test::catalog_spec("openai/gpt-oss-120b");
  ASSERT_EQ(m.hidden_size, 2880U);
  ASSERT_EQ(m.moe.expert_intermediate_size, 2880U);
  WeightOptions o;
  o.quant = m.quant;
  const uint64_t experts_x_layers = 128ULL * 36;
  const auto pad = [&](const char* gpu, uint32_t tp) {
    o.tp = tp;
    return mxfp4_padding_bytes(m, o, engines::vllm_mxfp4_padding(*gpu::find_gpu(gpu)));
  };
  // Blackwell (FlashInfer): 2880 -> 3072 for both sizes.
  EXPECT_EQ(pad("B200", 1), experts_x_layers * (vllm_mxfp4_expert_bytes(3072, 3072) -
                                                vllm_mxfp4_expert_bytes(2880, 2880)));
  // Hopper (Triton kernels): the intermediate size to a multiple of 64; 2880 already is, 1440
  // per rank at TP 2 is not (1472).
  EXPECT_EQ(pad("H100", 1), 0U);
  EXPECT_EQ(pad("H100", 2), experts_x_layers * (vllm_mxfp4_expert_bytes(1472, 2880) -
                                                vllm_mxfp4_expert_bytes(1440, 2880)));
  // Ampere (Marlin): intermediate to 128 (2944), hidden to 256 (3072).
  EXPECT_EQ(pad("A100-80GB", 1), experts_x_layers * (vllm_mxfp4_expert_bytes(2944, 3072) -
                                                     vllm_mxfp4_expert_bytes(2880, 2880)));
  // Nothing for a model that is not MXFP4.
  const auto dense = test::catalog_spec("meta-llama/Llama-3.1-8B-Instruct");
  WeightOptions d;
  EXPECT_EQ(mxfp4_padding_bytes(dense, d, {256, 256}), 0U);
}

}  // namespace
}  // namespace kvprof::estimate
