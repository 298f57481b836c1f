// parse_hf_config on the architectures of 2026: Qwen3.5 and MiniMax-M2, Qwen-VL text configs of
// newer transformers, DeepSeek sparse attention (DeepSeek-V3.2, GLM-5) and Gemma 4.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "kvprof/model/hf_config.hpp"
#include "support/hf_fixture.hpp"

namespace kvprof::model {
namespace {

using nlohmann::json;
using test::expect_input_error;
using test::has_warning;
using test::hf_fixture_json;
using test::load_hf_fixture;

TEST(HfConfig, Qwen35HybridUnderTextConfig) {
  json text = {{"model_type", "qwen3_5_moe_text"},
               {"hidden_size", 2048},
               {"num_attention_heads", 16},
               {"num_key_value_heads", 2},
               {"head_dim", 256},
               {"vocab_size", 248320},
               {"num_hidden_layers", 8},
               {"max_position_embeddings", 262144},
               {"attn_output_gate", true},
               {"linear_num_value_heads", 32},
               {"linear_num_key_heads", 16},
               {"linear_key_head_dim", 128},
               {"linear_value_head_dim", 128},
               {"linear_conv_kernel_dim", 4},
               {"num_experts", 256},
               {"num_experts_per_tok", 8},
               {"moe_intermediate_size", 512},
               {"shared_expert_intermediate_size", 512},
               {"dtype", "bfloat16"}};
  text["layer_types"] = json::array();
  for (int i = 0; i < 8; ++i)
    text["layer_types"].push_back(i % 4 == 3 ? "full_attention" : "linear_attention");
  const json c = {{"model_type", "qwen3_5_moe"},
                  {"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
                  {"text_config", text}};
  const auto m = parse_hf_config(c, "t").value();
  EXPECT_EQ(m.model_type, "qwen3_5_moe_text");
  EXPECT_EQ(m.count_layers(AttentionKind::full), 2U);
  EXPECT_EQ(m.count_layers(AttentionKind::linear), 6U);
  EXPECT_EQ(m.ssm.kind, SsmSpec::Kind::gated_delta_net);
  EXPECT_TRUE(m.attn_output_gate);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_TRUE(m.moe.shared_expert_gate);
  EXPECT_EQ(m.moe.n_expert, 256U);
  for (const auto& w : m.warnings)
    EXPECT_EQ(w.find("intermediate_size absent"), std::string::npos) << w;
  EXPECT_FALSE(has_warning(m, "unknown architecture"));
  // Without layer_types the full-attention layers come every full_attention_interval.
  json dense = text;
  dense["model_type"] = "qwen3_5_text";
  dense.erase("layer_types");
  dense["full_attention_interval"] = 4;
  dense["intermediate_size"] = 6144;
  for (const char* k : {"num_experts", "num_experts_per_tok", "moe_intermediate_size",
                        "shared_expert_intermediate_size"})
    dense.erase(k);
  const auto d = parse_hf_config(dense, "t").value();
  EXPECT_EQ(d.layers[3].attention, AttentionKind::full);
  EXPECT_EQ(d.layers[2].attention, AttentionKind::linear);
  EXPECT_FALSE(d.is_moe());
}

// MiniMax-M2: every layer routes to 256 experts of intermediate_size, with a routing bias.
TEST(HfConfig, MiniMaxM2RoutedExperts) {
  const json c = {{"model_type", "minimax_m2"},
                  {"architectures", {"MiniMaxM2ForCausalLM"}},
                  {"hidden_size", 3072},
                  {"num_attention_heads", 48},
                  {"num_key_value_heads", 8},
                  {"head_dim", 128},
                  {"rotary_dim", 64},
                  {"intermediate_size", 1536},
                  {"num_local_experts", 256},
                  {"num_experts_per_tok", 8},
                  {"use_routing_bias", true},
                  {"use_qk_norm", true},
                  {"num_hidden_layers", 62},
                  {"vocab_size", 200064},
                  {"max_position_embeddings", 204800},
                  {"dtype", "bfloat16"}};
  const auto m = parse_hf_config(c, "t").value();
  EXPECT_EQ(m.moe.n_expert, 256U);
  EXPECT_EQ(m.moe.n_expert_used, 8U);
  EXPECT_EQ(m.moe.expert_intermediate_size, 1536U);
  EXPECT_TRUE(m.moe.router_bias);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(m.rotary_dim, 64U);
  EXPECT_FALSE(has_warning(m, "unknown architecture"));
}

TEST(HfConfig, QwenVlTextConfigsOfNewerTransformersAreQwenVl) {
  // transformers 4.5x writes Qwen2.5-VL's text model as "qwen2_5_vl_text": the same decoder,
  // q/k/v biases included.
  auto c = hf_fixture_json("llama-3.1-8b.json");
  c["model_type"] = "qwen2_5_vl";
  c.erase("attention_bias");  // Qwen2 configs do not say it: their q/k/v always have biases
  c["architectures"] = json::array({"Qwen2_5_VLForConditionalGeneration"});
  json text = c;
  text["model_type"] = "qwen2_5_vl_text";
  c["text_config"] = text;
  const auto m = parse_hf_config(c, "vl.json").value();
  EXPECT_EQ(m.model_type, "qwen2_5_vl");
  EXPECT_TRUE(m.attention_bias);
  EXPECT_FALSE(has_warning(m, "unknown architecture"));
  text["model_type"] = "qwen2_vl_text";
  c["text_config"] = text;
  EXPECT_EQ(parse_hf_config(c, "vl.json").value().model_type, "qwen2_vl");
}

TEST(HfConfig, SparseAttentionIndexersFollowTheirLayerPattern) {
  std::ifstream in(std::string(KVPROF_SOURCE_DIR) + "/data/models.json");
  const auto doc = json::parse(in);
  json glm;
  for (const auto& e : doc.at("models"))
    if (e.at("id") == "zai-org/GLM-5.1") glm = e.at("config");
  ASSERT_TRUE(glm.is_object());
  auto m = parse_hf_config(glm, "glm.json").value();
  EXPECT_EQ(m.dsa.index_n_heads, 32U);
  EXPECT_EQ(m.dsa.index_head_dim, 128U);
  EXPECT_EQ(m.dsa.index_topk, 2048U);
  EXPECT_EQ(std::count_if(m.layers.begin(), m.layers.end(), [](auto& l) { return l.indexer; }), 78);
  EXPECT_FALSE(has_warning(m, "unknown architecture"));
  // GLM-5.2's IndexCache: one layer in 4 indexes, from offset 3 (21 of 78 layers).
  glm["index_topk_freq"] = 4;
  glm["index_skip_topk_offset"] = 3;
  m = parse_hf_config(glm, "glm.json").value();
  EXPECT_EQ(std::count_if(m.layers.begin(), m.layers.end(), [](auto& l) { return l.indexer; }), 21);
  EXPECT_TRUE(m.layers[0].indexer && m.layers[1].indexer && m.layers[2].indexer);
  EXPECT_FALSE(m.layers[3].indexer);
  // An explicit pattern or per-layer types win.
  glm["index_topk_pattern"] = std::string(77, 'S') + "F";
  m = parse_hf_config(glm, "glm.json").value();
  EXPECT_TRUE(m.layers[77].indexer);
  EXPECT_FALSE(m.layers[0].indexer);
  glm["index_topk_pattern"] = "FS";
  expect_input_error(glm, "index_topk_pattern");
}

TEST(HfConfig, Gemma4LayersKeepTheirOwnWidthsAndShareCaches) {
  // gemma-4-E2B-it (hash-verified copy): 35 layers, 4 sliding (head_dim 256) to 1 full
  // (global_head_dim 512), the last 20 layers reading earlier caches with double-wide MLPs, and
  // per-layer embeddings of 256 values.
  const auto m = load_hf_fixture("gemma-4-e2b-it.json");
  ASSERT_EQ(m.layers.size(), 35U);
  EXPECT_EQ(m.model_type, "gemma4_text");
  EXPECT_FALSE(has_warning(m, "unknown architecture"));
  EXPECT_EQ(m.count_layers(AttentionKind::full), 7U);
  EXPECT_EQ(m.layer_head_dim(0), 256U);
  EXPECT_EQ(m.layer_head_dim(4), 512U);
  EXPECT_EQ(m.layer_n_head_kv(4), 1U);  // no attention_k_eq_v: the model's KV heads
  EXPECT_FALSE(m.layers[14].kv_shared);
  EXPECT_TRUE(m.layers[15].kv_shared);
  EXPECT_EQ(m.layer_intermediate_size(14), 6144U);
  EXPECT_EQ(m.layer_intermediate_size(15), 12288U);
  EXPECT_EQ(m.per_layer_input_size, 256U);
  EXPECT_EQ(m.per_layer_vocab_size, 262144U);
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_EQ(m.norms_per_layer, 4U);
  EXPECT_TRUE(has_warning(m, "audio"));  // the audio encoder is named as not counted
}

}  // namespace
}  // namespace kvprof::model
