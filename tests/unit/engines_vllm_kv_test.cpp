// vLLM KV cache geometry and block accounting on configs whose startup logs are known.
#include "kvprof/engines/vllm/kv.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "kvprof/model/hf_config.hpp"

#include "support/test_data.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner the engines build on

namespace {

TEST(EstimateKv, BytesPerTokenFollowHeadsDtypeAndTp) {
  const auto m = test::catalog_spec("meta-llama/Llama-3.1-8B-Instruct");
  // 32 layers x (K + V) x 8 heads x 128 x 2 bytes.
  EXPECT_EQ(kv_layout(m, 1, 1, 0, KvCacheDtype::auto_, model::DType::bf16).kv_bytes_per_token,
            131072U);
  EXPECT_EQ(kv_layout(m, 1, 1, 0, KvCacheDtype::fp8_e4m3, model::DType::bf16).kv_bytes_per_token,
            65536U);
  EXPECT_EQ(kv_layout(m, 2, 1, 0, KvCacheDtype::auto_, model::DType::bf16).kv_bytes_per_token,
            65536U);
  EXPECT_EQ(kv_layout(m, 1, 2, 1, KvCacheDtype::auto_, model::DType::bf16).kv_bytes_per_token,
            65536U);
}

TEST(EstimateKv, KvHeadsReplicateBeyondTheirCount) {
  const auto m = test::catalog_spec("meta-llama/Llama-3.1-8B-Instruct");
  const auto l16 = kv_layout(m, 16, 1, 0, KvCacheDtype::auto_, model::DType::bf16);
  EXPECT_TRUE(l16.kv_heads_replicated);
  EXPECT_EQ(l16.kv_heads_per_rank, 1U);
  EXPECT_EQ(l16.kv_bytes_per_token, 32U * 2 * 128 * 2);
}

TEST(EstimateKv, MlaKeepsOneLatentPerTokenOnEveryRank) {
  const auto m = test::catalog_spec("deepseek-ai/DeepSeek-V3");
  const auto l = kv_layout(m, 8, 1, 0, KvCacheDtype::auto_, model::DType::bf16);
  EXPECT_EQ(l.kv_bytes_per_token, 61U * (512 + 64) * 2);
}

TEST(EstimateKv, SparseAttentionAddsTheIndexerKeysAndPacksFp8AsFp8DsMla) {
  // DeepSeek-V3.2 (vLLM's kv_cache_interface.py / the indexer's cache spec): the latent in bf16
  // (576 x 2) or as fp8_ds_mla (512 fp8 + 4 fp32 scales + 64 bf16 rope = 656 bytes), and the
  // indexer's 128 fp8 keys + one fp32 scale (132 bytes) on every layer, whatever the cache dtype.
  const auto ds = test::catalog_spec("deepseek-ai/DeepSeek-V3.2");
  EXPECT_EQ(kv_layout(ds, 8, 1, 0, KvCacheDtype::auto_, model::DType::bf16).kv_bytes_per_token,
            61U * (1152 + 132));
  EXPECT_EQ(kv_layout(ds, 8, 1, 0, KvCacheDtype::fp8_e4m3, model::DType::bf16).kv_bytes_per_token,
            61U * (656 + 132));
  // GLM-5.1: 78 layers of the same cache.
  const auto glm = test::catalog_spec("zai-org/GLM-5.1");
  EXPECT_EQ(kv_layout(glm, 8, 1, 0, KvCacheDtype::fp8_e4m3, model::DType::bf16).kv_bytes_per_token,
            61'464U);
  // Layers without an indexer (GLM-5.2's index_topk_freq) keep only the latent.
  auto shared = glm;
  for (size_t i = 0; i < shared.layers.size(); ++i)
    shared.layers[i].indexer = i % 4 == 0;
  EXPECT_EQ(
      kv_layout(shared, 8, 1, 0, KvCacheDtype::fp8_e4m3, model::DType::bf16).kv_bytes_per_token,
      78U * 656 + 20U * 132);
}

TEST(EstimateKv, Gemma4FullLayersAreWiderAndSharedLayersKeepNoCache) {
  // gemma-4-26B-A4B: 25 sliding layers of 8 KV heads x 256 and 5 full layers of 2 x 512
  // (attention_k_eq_v: K doubles as V, but vLLM still caches both).
  const auto moe = test::catalog_spec("google/gemma-4-26B-A4B");
  EXPECT_EQ(kv_layout(moe, 1, 1, 0, KvCacheDtype::auto_, model::DType::bf16).kv_bytes_per_token,
            25U * 8 * 256 * 4 + 5U * 2 * 512 * 4);
  EXPECT_EQ(kv_layout(moe, 2, 1, 0, KvCacheDtype::auto_, model::DType::bf16).kv_bytes_per_token,
            25U * 4 * 256 * 4 + 5U * 1 * 512 * 4);
  EXPECT_TRUE(moe.moe_with_dense_mlp);
  // gemma-4-E2B-it: only the first 15 layers (12 sliding, 3 full) keep a cache of their own.
  std::ifstream in(std::string(KVPROF_FIXTURES_DIR) + "/hf/gemma-4-e2b-it.json");
  std::stringstream text;
  text << in.rdbuf();
  const auto e2b = model::parse_hf_config_text(text.str(), "gemma-4-e2b-it.json").value();
  const auto l = kv_layout(e2b, 1, 1, 0, KvCacheDtype::auto_, model::DType::bf16);
  EXPECT_EQ(l.layers.size(), 15U);
  EXPECT_EQ(l.kv_bytes_per_token, 12U * 1 * 256 * 4 + 3U * 1 * 512 * 4);
}

TEST(EstimateKv, UniformModelBlocksAndConcurrencyAsVllmLogs) {
  // CodeLlama-7b, 61.66 GiB available, block 16: vLLM logged 7,891 blocks = 126,256 tokens and
  // 15.41x for 8,192 tokens. Blocks are floor(available / (page x layers)).
  const auto m = test::catalog_spec("codellama/CodeLlama-7b-hf");
  const auto layout = kv_layout(m, 1, 1, 0, KvCacheDtype::auto_, model::DType::bf16);
  VllmKvParams p;
  p.max_model_len = 8192;
  const uint64_t block_bytes = 16ULL * layout.kv_bytes_per_token;
  const auto cfg = vllm_kv_config({layout}, {static_cast<int64_t>(7891 * block_bytes + 100)}, p);
  EXPECT_EQ(cfg.num_blocks, 7891U);
  EXPECT_EQ(cfg.kv_cache_tokens, 126256U);
  EXPECT_NEAR(cfg.max_concurrency, 15.41, 0.005);
}

TEST(EstimateKv, SlidingWindowGroupsLikeGemma2) {
  // gemma-2-27b: 23 sliding (4096) + 23 full layers -> 2 groups; vLLM logged 7,335 blocks,
  // 58,672 tokens (= 7335 // 2 * 16) and 7.16x for 8,192 tokens (sliding needs 513 blocks).
  const auto m = test::catalog_spec("google/gemma-2-27b-it");
  const auto layout = kv_layout(m, 1, 1, 0, KvCacheDtype::auto_, model::DType::bf16);
  VllmKvParams p;
  p.max_model_len = 8192;
  p.max_num_batched_tokens = 8192;
  const uint64_t page = 16ULL * layout.layers.front().bytes_per_token;
  const auto cfg = vllm_kv_config({layout}, {static_cast<int64_t>(7335 * page * 23 + 5)}, p);
  ASSERT_EQ(cfg.groups.size(), 2U);
  EXPECT_EQ(cfg.num_blocks, 7335U);
  EXPECT_EQ(cfg.kv_cache_tokens, 58672U);
  EXPECT_EQ(cfg.blocks_per_max_len_request, 512U + 513U);
  EXPECT_NEAR(cfg.max_concurrency, 7.16, 0.005);
}

TEST(EstimateKv, PipelineStagesTakeTheSmallestBlockCount) {
  const auto m = test::catalog_spec("meta-llama/Llama-3.1-8B-Instruct");
  const auto a = kv_layout(m, 1, 2, 0, KvCacheDtype::auto_, model::DType::bf16);
  const auto b = kv_layout(m, 1, 2, 1, KvCacheDtype::auto_, model::DType::bf16);
  VllmKvParams p;
  p.max_model_len = 8192;
  const auto cfg = vllm_kv_config({a, b}, {int64_t{10} << 30, int64_t{8} << 30}, p);
  EXPECT_EQ(cfg.blocks_per_worker.size(), 2U);
  EXPECT_EQ(cfg.num_blocks, cfg.blocks_per_worker[1]);
  EXPECT_LT(cfg.blocks_per_worker[1], cfg.blocks_per_worker[0]);
}

TEST(EstimateKv, NoMemoryMeansNoBlocks) {
  const auto m = test::catalog_spec("meta-llama/Llama-3.1-8B-Instruct");
  const auto l = kv_layout(m, 1, 1, 0, KvCacheDtype::auto_, model::DType::bf16);
  VllmKvParams p;
  p.max_model_len = 8192;
  EXPECT_EQ(vllm_kv_config({l}, {-5}, p).num_blocks, 0U);
}

}  // namespace
}  // namespace kvprof::engines
