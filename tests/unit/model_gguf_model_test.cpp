// Tests of src/kvprof/model/gguf_model.cpp: ModelSpec from GGUF files written by the test-only
// writer, for dense, MoE, MLA, sliding-window and SSM architectures, and missing-key errors.
#include <gtest/gtest.h>

#include "kvprof/model/gguf.hpp"
#include "support/gguf_writer.hpp"
#include "support/hf_fixture.hpp"

namespace kvprof::model {
namespace {

using test::GgufWriter;
namespace gg = test::ggml;

Expected<ModelSpec> model_of(const GgufWriter& w) {
  const auto bytes = w.build();
  auto f = parse_gguf(bytes, bytes.size());
  if (!f) return std::unexpected(f.error());
  return model_from_gguf(*f, "test.gguf");
}

// Standard keys of a dense model; `skip` leaves one key out.
GgufWriter dense_keys(const std::string& arch, uint32_t n_layer, const std::string& skip = "") {
  GgufWriter w;
  const auto put = [&](const std::string& k, uint32_t v) {
    if (k != skip) w.u32(arch + "." + k, v);
  };
  if (skip != "general.architecture") w.str("general.architecture", arch);
  put("block_count", n_layer);
  put("embedding_length", 256);
  put("feed_forward_length", 512);
  put("attention.head_count", 4);
  put("attention.head_count_kv", 2);
  put("context_length", 2048);
  return w;
}

// A 2-layer llama with Q4_K_M-style tensors (hidden 256, ff 512, 4 heads of 64, 2 KV heads).
GgufWriter llama_file() {
  GgufWriter w = dense_keys("llama", 2);
  w.u32("llama.rope.dimension_count", 64).u32("general.file_type", 15);
  std::vector<std::string> tokens(300, "t");
  w.arr_str("tokenizer.ggml.tokens", tokens);
  w.tensor("token_embd.weight", gg::Q4_K, {256, 300});
  w.tensor("output_norm.weight", gg::F32, {256});
  w.tensor("output.weight", gg::Q6_K, {256, 300});
  for (int i = 0; i < 2; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    w.tensor(b + "attn_norm.weight", gg::F32, {256});
    w.tensor(b + "attn_q.weight", gg::Q4_K, {256, 256});
    w.tensor(b + "attn_k.weight", gg::Q4_K, {256, 128});
    w.tensor(b + "attn_v.weight", gg::Q6_K, {256, 128});
    w.tensor(b + "attn_output.weight", gg::Q4_K, {256, 256});
    w.tensor(b + "ffn_norm.weight", gg::F32, {256});
    w.tensor(b + "ffn_gate.weight", gg::Q4_K, {256, 512});
    w.tensor(b + "ffn_up.weight", gg::Q4_K, {256, 512});
    w.tensor(b + "ffn_down.weight", gg::Q6_K, {512, 256});
  }
  return w;
}

TEST(GgufModel, LlamaDimsAndExactTensorBytes) {
  const auto m = model_of(llama_file());
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->origin, ModelSpec::Origin::gguf);
  EXPECT_EQ(m->architecture, "llama");
  EXPECT_EQ(m->model_type, "llama");
  EXPECT_EQ(m->n_layer, 2U);
  EXPECT_EQ(m->hidden_size, 256U);
  EXPECT_EQ(m->intermediate_size, 512U);
  EXPECT_EQ(m->n_head, 4U);
  EXPECT_EQ(m->n_head_kv, 2U);
  EXPECT_EQ(m->head_dim, 64U);
  EXPECT_EQ(m->vocab_size, 300U);
  EXPECT_EQ(m->max_position_embeddings, 2048U);
  EXPECT_EQ(m->rotary_dim, 64U);
  EXPECT_FALSE(m->tie_word_embeddings);
  EXPECT_EQ(m->mlp_matrices, 3U);
  EXPECT_EQ(m->norms_per_layer, 2U);
  EXPECT_FALSE(m->attention_bias);
  ASSERT_EQ(m->layers.size(), 2U);
  EXPECT_EQ(m->count_layers(AttentionKind::full), 2U);
  EXPECT_EQ(m->quant.method, QuantMethod::gguf);
  EXPECT_EQ(m->quant.format, "Q4_K_M");
  ASSERT_EQ(m->tensors.size(), 21U);
  // Q4_K: 144 bytes per 256 weights; Q6_K: 210 per 256; F32: 4 per weight.
  EXPECT_EQ(m->tensors[0].bytes, 300U * 144U);
  EXPECT_EQ(m->tensors[0].type_name, "Q4_K");
  EXPECT_EQ(m->tensors[2].bytes, 300U * 210U);
  EXPECT_EQ(m->tensors[3].bytes, 1024U);
  uint64_t total = 0;
  for (const auto& t : m->tensors)
    total += t.bytes;
  const uint64_t per_layer = 1024 + 256 * 144 + 128 * 144 + 128 * 210 + 256 * 144 + 1024 +
                             512 * 144 + 512 * 144 + 256 * 2 * 210;
  EXPECT_EQ(total, 300U * 144U + 1024U + 300U * 210U + 2 * per_layer);
}

TEST(GgufModel, MissingKeysAreNamed) {
  for (const std::string key :
       {"block_count", "embedding_length", "attention.head_count", "feed_forward_length"}) {
    const auto m = model_of(dense_keys("qwen2", 2, key));
    ASSERT_FALSE(m.has_value()) << key;
    EXPECT_EQ(m.error().kind, ErrorKind::input);
    EXPECT_NE(m.error().message.find("qwen2." + key), std::string::npos) << m.error().message;
  }
  const auto no_arch = model_of(dense_keys("qwen2", 2, "general.architecture"));
  ASSERT_FALSE(no_arch.has_value());
  EXPECT_NE(no_arch.error().message.find("general.architecture"), std::string::npos);
}

TEST(GgufModel, MistypedAndOutOfRangeKeys) {
  GgufWriter w = dense_keys("llama", 2, "block_count");
  w.str("llama.block_count", "32");
  auto m = model_of(w);
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.error().message.find("llama.block_count"), std::string::npos);
  GgufWriter big = dense_keys("llama", 2, "embedding_length");
  big.u64("llama.embedding_length", 1ULL << 40);
  m = model_of(big);
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.error().message.find("llama.embedding_length"), std::string::npos);
  GgufWriter many = dense_keys("llama", 100000);
  EXPECT_FALSE(model_of(many).has_value());
}

TEST(GgufModel, PerLayerHeadCountKvArrays) {
  GgufWriter w = dense_keys("llama", 3, "attention.head_count_kv");
  w.arr_u32("llama.attention.head_count_kv", {2, 1, 2});
  auto m = model_of(w);
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->n_head_kv, 2U);
  EXPECT_TRUE(test::has_warning(*m, "differs between layers"));

  GgufWriter wrong = dense_keys("llama", 3, "attention.head_count_kv");
  wrong.arr_u32("llama.attention.head_count_kv", {2, 2});
  m = model_of(wrong);
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.error().message.find("2 entries for 3 layers"), std::string::npos);
}

TEST(GgufModel, JambaHybridLayersFromZeroKvHeads) {
  GgufWriter w = dense_keys("jamba", 4, "attention.head_count_kv");
  w.arr_u32("jamba.attention.head_count_kv", {0, 0, 0, 2});
  w.u32("jamba.ssm.conv_kernel", 4).u32("jamba.ssm.inner_size", 512);
  w.u32("jamba.ssm.state_size", 16).u32("jamba.ssm.time_step_rank", 16);
  const auto m = model_of(w);
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->count_layers(AttentionKind::mamba), 3U);
  EXPECT_EQ(m->layers[3].attention, AttentionKind::full);
  EXPECT_EQ(m->ssm.kind, SsmSpec::Kind::mamba1);
  EXPECT_EQ(m->ssm.d_inner, 512U);
  EXPECT_EQ(m->ssm.d_state, 16U);
  EXPECT_EQ(m->ssm.d_conv, 4U);
  EXPECT_EQ(m->ssm.dt_rank, 16U);
  EXPECT_EQ(m->n_head_kv, 2U);

  GgufWriter no_ssm = dense_keys("jamba", 2);
  const auto bad = model_of(no_ssm);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("jamba.ssm.conv_kernel"), std::string::npos);
}

TEST(GgufModel, MambaAndGraniteHybrid) {
  GgufWriter w;
  w.str("general.architecture", "mamba").u32("mamba.block_count", 3);
  w.u32("mamba.embedding_length", 256).u32("mamba.context_length", 0);
  w.u32("mamba.ssm.conv_kernel", 4).u32("mamba.ssm.inner_size", 512);
  w.u32("mamba.ssm.state_size", 16).u32("mamba.ssm.time_step_rank", 16);
  auto m = model_of(w);
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->count_layers(AttentionKind::mamba), 3U);
  EXPECT_EQ(m->n_head, 0U);

  GgufWriter g = dense_keys("granitehybrid", 4, "attention.head_count_kv");
  g.arr_u32("granitehybrid.attention.head_count_kv", {0, 2, 0, 0});
  g.u32("granitehybrid.ssm.conv_kernel", 4).u32("granitehybrid.ssm.inner_size", 512);
  g.u32("granitehybrid.ssm.state_size", 128).u32("granitehybrid.ssm.time_step_rank", 8);
  g.u32("granitehybrid.ssm.group_count", 1);
  m = model_of(g);
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->ssm.kind, SsmSpec::Kind::mamba2);
  EXPECT_EQ(m->ssm.n_heads, 8U);
  EXPECT_EQ(m->ssm.head_dim, 64U);
  EXPECT_EQ(m->ssm.n_groups, 1U);
  EXPECT_EQ(m->layers[1].attention, AttentionKind::full);
  EXPECT_EQ(m->count_layers(AttentionKind::mamba), 3U);
}

TEST(GgufModel, Gemma2AlternatesAndGemma3HasOneGlobalInSix) {
  GgufWriter g2 = dense_keys("gemma2", 4);
  g2.u32("gemma2.attention.sliding_window", 4096).u32("gemma2.attention.key_length", 128);
  g2.tensor("blk.0.attn_norm.weight", gg::F32, {256});
  g2.tensor("blk.0.post_attention_norm.weight", gg::F32, {256});
  g2.tensor("blk.0.ffn_norm.weight", gg::F32, {256});
  g2.tensor("blk.0.post_ffw_norm.weight", gg::F32, {256});
  auto m = model_of(g2);
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->head_dim, 128U);
  EXPECT_EQ(m->norms_per_layer, 4U);
  EXPECT_EQ(m->layers[0].attention, AttentionKind::sliding);
  EXPECT_EQ(m->layers[0].window_tokens, 4096U);
  EXPECT_EQ(m->layers[1].attention, AttentionKind::full);
  EXPECT_EQ(m->layers[2].attention, AttentionKind::sliding);
  EXPECT_EQ(m->layers[3].attention, AttentionKind::full);

  GgufWriter g3 = dense_keys("gemma3", 12);
  g3.u32("gemma3.attention.sliding_window", 1024);
  m = model_of(g3);
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->model_type, "gemma3_text");
  EXPECT_EQ(m->count_layers(AttentionKind::sliding), 10U);
  EXPECT_EQ(m->layers[5].attention, AttentionKind::full);
  EXPECT_EQ(m->layers[11].attention, AttentionKind::full);
  EXPECT_EQ(m->layers[4].window_tokens, 1024U);
}

TEST(GgufModel, SlidingWindowPatternKeyAndIgnoredWindows) {
  GgufWriter w = dense_keys("llama", 3);
  w.u32("llama.attention.sliding_window", 512);
  w.arr_bool("llama.attention.sliding_window_pattern", {false, true, true});
  auto m = model_of(w);
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->layers[0].attention, AttentionKind::full);
  EXPECT_EQ(m->layers[1].attention, AttentionKind::sliding);
  EXPECT_EQ(m->layers[2].window_tokens, 512U);

  GgufWriter q = dense_keys("qwen2", 2);
  q.u32("qwen2.attention.sliding_window", 4096);
  m = model_of(q);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->count_layers(AttentionKind::full), 2U);
  EXPECT_TRUE(test::has_warning(*m, "sliding window"));
}

TEST(GgufModel, GptOssSlidingEvenLayersMxfp4Experts) {
  GgufWriter w = dense_keys("gpt-oss", 4, "feed_forward_length");
  w.u32("gpt-oss.attention.key_length", 64).u32("gpt-oss.attention.value_length", 64);
  w.u32("gpt-oss.attention.sliding_window", 128).u32("gpt-oss.expert_count", 32);
  w.u32("gpt-oss.expert_used_count", 4).u32("gpt-oss.expert_feed_forward_length", 256);
  w.u32("general.file_type", 38);
  for (int i = 0; i < 4; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    w.tensor(b + "ffn_gate_inp.weight", gg::F32, {256, 32});
    w.tensor(b + "ffn_up_exps.weight", gg::MXFP4, {256, 256, 32});
  }
  const auto m = model_of(w);
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->model_type, "gpt_oss");
  EXPECT_EQ(m->layers[0].attention, AttentionKind::sliding);
  EXPECT_EQ(m->layers[0].window_tokens, 128U);
  EXPECT_EQ(m->layers[1].attention, AttentionKind::full);
  EXPECT_EQ(m->moe.n_expert, 32U);
  EXPECT_EQ(m->moe.n_expert_used, 4U);
  EXPECT_EQ(m->moe.expert_intermediate_size, 256U);
  EXPECT_TRUE(m->moe.router_bias);
  EXPECT_TRUE(m->moe.expert_bias);
  for (const auto& l : m->layers)
    EXPECT_TRUE(l.moe);
  EXPECT_EQ(m->quant.format, "MXFP4_MOE");
  // MXFP4: 17 bytes per 32 weights.
  EXPECT_EQ(m->tensors[1].bytes, 256U * 256U * 32U / 32U * 17U);
  EXPECT_EQ(m->tensors[1].type_name, "MXFP4");
}

GgufWriter deepseek_keys(bool new_layout) {
  GgufWriter w = dense_keys("deepseek2", 3, "attention.head_count_kv");
  w.u32("deepseek2.attention.head_count_kv", new_layout ? 1 : 4);
  w.u32("deepseek2.attention.kv_lora_rank", 512).u32("deepseek2.attention.q_lora_rank", 1536);
  w.u32("deepseek2.rope.dimension_count", 64);
  if (new_layout) {
    w.u32("deepseek2.attention.key_length", 576).u32("deepseek2.attention.value_length", 512);
    w.u32("deepseek2.attention.key_length_mla", 192);
    w.u32("deepseek2.attention.value_length_mla", 128);
  } else {
    w.u32("deepseek2.attention.key_length", 192).u32("deepseek2.attention.value_length", 128);
  }
  w.u32("deepseek2.expert_count", 64).u32("deepseek2.expert_used_count", 6);
  w.u32("deepseek2.expert_shared_count", 2).u32("deepseek2.expert_feed_forward_length", 128);
  w.u32("deepseek2.leading_dense_block_count", 1);
  return w;
}

TEST(GgufModel, DeepSeek2MlaBothKeyLayouts) {
  for (bool new_layout : {true, false}) {
    SCOPED_TRACE(new_layout ? "new" : "old");
    const auto m = model_of(deepseek_keys(new_layout));
    ASSERT_TRUE(m.has_value()) << m.error().message;
    EXPECT_TRUE(m->mla.enabled());
    EXPECT_EQ(m->mla.kv_lora_rank, 512U);
    EXPECT_EQ(m->mla.q_lora_rank, 1536U);
    EXPECT_EQ(m->mla.qk_rope_head_dim, 64U);
    EXPECT_EQ(m->mla.qk_nope_head_dim, 128U);
    EXPECT_EQ(m->mla.v_head_dim, 128U);
    EXPECT_EQ(m->head_dim, 192U);
    EXPECT_EQ(m->n_head_kv, 4U);
    EXPECT_EQ(m->count_layers(AttentionKind::mla), 3U);
    EXPECT_FALSE(m->layers[0].moe);
    EXPECT_TRUE(m->layers[1].moe);
    EXPECT_EQ(m->moe.n_shared_expert, 2U);
    EXPECT_EQ(m->moe.shared_expert_intermediate_size, 128U);
  }
}

TEST(GgufModel, Qwen2MoeSharedExpertFromKeysAndTensors) {
  GgufWriter w = dense_keys("qwen2moe", 2);
  w.u32("qwen2moe.expert_count", 60).u32("qwen2moe.expert_used_count", 4);
  w.u32("qwen2moe.expert_feed_forward_length", 1408);
  w.u32("qwen2moe.expert_shared_feed_forward_length", 5632);
  w.tensor("blk.0.attn_q.bias", gg::F32, {256});
  w.tensor("blk.0.ffn_gate_inp_shexp.weight", gg::F32, {256});
  w.tensor("blk.0.ffn_up_shexp.weight", gg::F32, {256, 8});
  const auto m = model_of(w);
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->model_type, "qwen2_moe");
  EXPECT_EQ(m->moe.n_shared_expert, 1U);
  EXPECT_EQ(m->moe.shared_expert_intermediate_size, 5632U);
  EXPECT_TRUE(m->moe.shared_expert_gate);
  EXPECT_TRUE(m->attention_bias);
  EXPECT_EQ(m->dtype, DType::f32);
  EXPECT_EQ(m->quant.format, "F32");
}

TEST(GgufModel, Phi2PartialRotaryParallelBlockTiedAndVocabFallbacks) {
  GgufWriter w = dense_keys("phi2", 2, "attention.head_count_kv");
  w.u32("phi2.rope.dimension_count", 32);
  w.tensor("token_embd.weight", gg::F16, {256, 777});
  w.tensor("blk.0.attn_norm.weight", gg::F32, {256});
  w.tensor("blk.0.attn_norm.bias", gg::F32, {256});
  w.tensor("blk.0.ffn_up.weight", gg::F16, {256, 512});
  w.tensor("blk.0.ffn_up.bias", gg::F32, {512});
  const auto m = model_of(w);
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->model_type, "phi");
  EXPECT_EQ(m->rotary_dim, 32U);
  EXPECT_EQ(m->n_head_kv, 4U);  // no head_count_kv: MHA
  EXPECT_TRUE(m->parallel_attn_mlp);
  EXPECT_TRUE(m->tie_word_embeddings);
  EXPECT_EQ(m->vocab_size, 777U);
  EXPECT_EQ(m->mlp_matrices, 2U);
  EXPECT_TRUE(m->mlp_bias);
  EXPECT_TRUE(m->layer_norm_bias);
  EXPECT_EQ(m->dtype, DType::f16);

  GgufWriter v = dense_keys("llama", 1);
  v.u32("llama.vocab_size", 1234).arr_str("tokenizer.ggml.tokens", {"a", "b"});
  const auto mv = model_of(v);
  ASSERT_TRUE(mv.has_value());
  EXPECT_EQ(mv->vocab_size, 1234U);
}

TEST(GgufModel, UnknownArchitectureReadsCommonKeysWithWarning) {
  const auto m = model_of(dense_keys("starcoder9", 2));
  ASSERT_TRUE(m.has_value()) << m.error().message;
  EXPECT_EQ(m->n_layer, 2U);
  EXPECT_TRUE(test::has_warning(*m, "starcoder9"));
}

}  // namespace
}  // namespace kvprof::model
