// parse_hf_config on published config.json files (tests/fixtures/hf/) and on broken ones.
#include "kvprof/model/hf_config.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "support/hf_fixture.hpp"

namespace kvprof::model {
namespace {

using nlohmann::json;

using test::expect_input_error;
using test::has_warning;
using test::hf_fixture_json;
using test::load_hf_fixture;

TEST(HfConfig, Llama31DenseGqa) {
  const auto m = load_hf_fixture("llama-3.1-8b.json");
  EXPECT_EQ(m.model_type, "llama");
  EXPECT_EQ(m.architecture, "LlamaForCausalLM");
  EXPECT_EQ(m.origin, ModelSpec::Origin::hf_config);
  EXPECT_EQ(m.n_layer, 32U);
  EXPECT_EQ(m.hidden_size, 4096U);
  EXPECT_EQ(m.intermediate_size, 14336U);
  EXPECT_EQ(m.n_head, 32U);
  EXPECT_EQ(m.n_head_kv, 8U);
  EXPECT_EQ(m.head_dim, 128U);
  EXPECT_EQ(m.rotary_dim, 128U);
  EXPECT_EQ(m.vocab_size, 128256U);
  EXPECT_EQ(m.max_position_embeddings, 131072U);
  EXPECT_EQ(m.mlp_matrices, 3U);
  EXPECT_FALSE(m.attention_bias);
  EXPECT_FALSE(m.tie_word_embeddings);
  EXPECT_EQ(m.dtype, DType::bf16);
  EXPECT_EQ(m.quant.method, QuantMethod::none);
  ASSERT_EQ(m.layers.size(), 32U);
  EXPECT_EQ(m.count_layers(AttentionKind::full), 32U);
  EXPECT_FALSE(m.is_moe());
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
}

TEST(HfConfig, Qwen25HasQkvBiasAndNoSlidingWindow) {
  const auto m = load_hf_fixture("qwen2.5-7b.json");
  EXPECT_EQ(m.head_dim, 3584U / 28U);
  EXPECT_EQ(m.n_head_kv, 4U);
  EXPECT_TRUE(m.attention_bias);
  EXPECT_FALSE(m.o_bias);
  // sliding_window 131072 with use_sliding_window false: every layer is full.
  EXPECT_EQ(m.count_layers(AttentionKind::full), 28U);
}

TEST(HfConfig, Qwen2SlidingOnlyFromMaxWindowLayers) {
  auto c = hf_fixture_json("qwen2.5-7b.json");
  c["use_sliding_window"] = true;
  c["sliding_window"] = 4096;
  c["max_window_layers"] = 20;
  const auto m = parse_hf_config(c, "t").value();
  EXPECT_EQ(m.count_layers(AttentionKind::full), 20U);
  EXPECT_EQ(m.count_layers(AttentionKind::sliding), 8U);
  EXPECT_EQ(m.layers[20].window_tokens, 4096U);
  EXPECT_EQ(m.layers[19].attention, AttentionKind::full);
}

TEST(HfConfig, Gemma2AlternatesSlidingFromLayerZero) {
  const auto m = load_hf_fixture("gemma-2-9b.json");
  EXPECT_EQ(m.head_dim, 256U);
  EXPECT_EQ(m.norms_per_layer, 4U);
  EXPECT_TRUE(m.tie_word_embeddings);  // Gemma2Config default
  ASSERT_EQ(m.layers.size(), 42U);
  EXPECT_EQ(m.layers[0].attention, AttentionKind::sliding);
  EXPECT_EQ(m.layers[0].window_tokens, 4096U);
  EXPECT_EQ(m.layers[1].attention, AttentionKind::full);
  EXPECT_EQ(m.count_layers(AttentionKind::sliding), 21U);
}

TEST(HfConfig, Gemma3NestedTextConfigUsesDefaultsAndPattern) {
  const auto m = load_hf_fixture("gemma-3-4b.json");
  EXPECT_EQ(m.model_type, "gemma3_text");
  EXPECT_EQ(m.architecture, "Gemma3ForConditionalGeneration");
  EXPECT_EQ(m.n_layer, 34U);
  EXPECT_EQ(m.hidden_size, 2560U);
  // Fields the published text_config omits come from Gemma3TextConfig's defaults.
  EXPECT_EQ(m.n_head, 8U);
  EXPECT_EQ(m.n_head_kv, 4U);
  EXPECT_EQ(m.head_dim, 256U);
  EXPECT_EQ(m.vocab_size, 262208U);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(m.norms_per_layer, 4U);
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_EQ(m.dtype, DType::bf16);  // from the outer config
  // sliding_window_pattern 6: five local layers, then one global.
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const bool global = (i + 1) % 6 == 0;
    EXPECT_EQ(m.layers[i].attention, global ? AttentionKind::full : AttentionKind::sliding) << i;
    EXPECT_EQ(m.layers[i].window_tokens, global ? 0U : 1024U) << i;
  }
  EXPECT_EQ(m.count_layers(AttentionKind::full), 5U);
  // SigLIP-so400m (~0.41B) + projector.
  EXPECT_GT(m.extra_params, 380'000'000U);
  EXPECT_LT(m.extra_params, 460'000'000U);
  EXPECT_TRUE(has_warning(m, "approximate"));
}

TEST(HfConfig, LayerTypesOverridePatterns) {
  auto c = hf_fixture_json("gemma-2-9b.json");
  c["num_hidden_layers"] = 4;
  c["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention", "full_attention"};
  const auto m = parse_hf_config(c, "t").value();
  EXPECT_EQ(m.layers[0].attention, AttentionKind::full);
  EXPECT_EQ(m.layers[1].attention, AttentionKind::sliding);
  EXPECT_EQ(m.layers[3].attention, AttentionKind::full);
  c["layer_types"] = {"full_attention"};
  expect_input_error(c, "layer_types");
  c["layer_types"] = {"full_attention", "warp_attention", "full_attention", "full_attention"};
  expect_input_error(c, "warp_attention");
}

TEST(HfConfig, MistralV01SlidesEveryLayer) {
  const auto m = load_hf_fixture("mistral-7b-v0.1.json");
  EXPECT_EQ(m.count_layers(AttentionKind::sliding), 32U);
  EXPECT_EQ(m.layers[31].window_tokens, 4096U);
}

TEST(HfConfig, MixtralAllLayersMoe) {
  const auto m = load_hf_fixture("mixtral-8x7b.json");
  ASSERT_TRUE(m.is_moe());
  EXPECT_EQ(m.moe.n_expert, 8U);
  EXPECT_EQ(m.moe.n_expert_used, 2U);
  EXPECT_EQ(m.moe.expert_intermediate_size, 14336U);
  EXPECT_EQ(m.moe.n_shared_expert, 0U);
  for (const auto& l : m.layers)
    EXPECT_TRUE(l.moe);
  EXPECT_EQ(m.count_layers(AttentionKind::full), 32U);  // sliding_window: null
}

TEST(HfConfig, DeepSeekV3MlaMoeFp8Blocks) {
  const auto m = load_hf_fixture("deepseek-v3.json");
  EXPECT_EQ(m.n_layer, 61U);
  EXPECT_TRUE(m.mla.enabled());
  EXPECT_EQ(m.mla.kv_lora_rank, 512U);
  EXPECT_EQ(m.mla.q_lora_rank, 1536U);
  EXPECT_EQ(m.mla.qk_nope_head_dim, 128U);
  EXPECT_EQ(m.mla.qk_rope_head_dim, 64U);
  EXPECT_EQ(m.mla.v_head_dim, 128U);
  EXPECT_EQ(m.head_dim, 192U);
  EXPECT_EQ(m.rotary_dim, 64U);
  EXPECT_EQ(m.count_layers(AttentionKind::mla), 61U);
  EXPECT_EQ(m.moe.n_expert, 256U);
  EXPECT_EQ(m.moe.n_expert_used, 8U);
  EXPECT_EQ(m.moe.expert_intermediate_size, 2048U);
  EXPECT_EQ(m.moe.n_shared_expert, 1U);
  EXPECT_EQ(m.moe.shared_expert_intermediate_size, 2048U);
  EXPECT_TRUE(m.moe.router_bias);  // noaux_tc e_score_correction_bias
  EXPECT_EQ(m.intermediate_size, 18432U);
  EXPECT_FALSE(m.layers[2].moe);  // first_k_dense_replace = 3
  EXPECT_TRUE(m.layers[3].moe);
  EXPECT_TRUE(m.layers[60].moe);
  EXPECT_EQ(m.n_mtp_layers, 1U);
  EXPECT_EQ(m.quant.method, QuantMethod::fp8);
  EXPECT_EQ(m.quant.weight_bits, 8U);
  EXPECT_TRUE(m.quant.weight_float);
  EXPECT_EQ(m.quant.block_rows, 128U);
  EXPECT_EQ(m.quant.block_cols, 128U);
  EXPECT_EQ(m.quant.activation_bits, 8U);
}

TEST(HfConfig, DeepSeekV2LiteHasNoQLora) {
  auto c = hf_fixture_json("deepseek-v3.json");
  c["q_lora_rank"] = nullptr;
  const auto m = parse_hf_config(c, "t").value();
  EXPECT_EQ(m.mla.q_lora_rank, 0U);
  c.erase("qk_rope_head_dim");
  expect_input_error(c, "qk_rope_head_dim");
}

TEST(HfConfig, Qwen3NextLinearAttentionEveryFourth) {
  const auto m = load_hf_fixture("qwen3-next-80b-a3b.json");
  EXPECT_EQ(m.head_dim, 256U);
  EXPECT_EQ(m.rotary_dim, 64U);  // partial_rotary_factor 0.25
  EXPECT_TRUE(m.attn_output_gate);
  EXPECT_TRUE(m.qk_norm);
  EXPECT_EQ(m.count_layers(AttentionKind::full), 12U);
  EXPECT_EQ(m.count_layers(AttentionKind::linear), 36U);
  EXPECT_EQ(m.layers[3].attention, AttentionKind::full);
  EXPECT_EQ(m.layers[0].attention, AttentionKind::linear);
  EXPECT_EQ(m.ssm.kind, SsmSpec::Kind::gated_delta_net);
  EXPECT_EQ(m.ssm.n_heads, 32U);
  EXPECT_EQ(m.ssm.n_k_heads, 16U);
  EXPECT_EQ(m.ssm.head_dim, 128U);
  EXPECT_EQ(m.ssm.k_head_dim, 128U);
  EXPECT_EQ(m.ssm.d_conv, 4U);
  EXPECT_EQ(m.ssm.d_inner, 32U * 128U);
  EXPECT_EQ(m.moe.n_expert, 512U);
  EXPECT_EQ(m.moe.n_expert_used, 10U);
  EXPECT_EQ(m.moe.expert_intermediate_size, 512U);
  EXPECT_EQ(m.moe.n_shared_expert, 1U);
  EXPECT_EQ(m.moe.shared_expert_intermediate_size, 512U);
  EXPECT_TRUE(m.moe.shared_expert_gate);
  for (const auto& l : m.layers)
    EXPECT_TRUE(l.moe);
}

// Qwen3.5 / Qwen3.6: Qwen3-Next's hybrid (gated delta net + gated full attention) under the VLM
// wrapper's text_config; the MoE sizes have no dense MLP, so a missing intermediate_size is no
// warning.
TEST(HfConfig, JambaMambaMoeSchedule) {
  const auto m = load_hf_fixture("jamba-mini-1.6.json");
  EXPECT_EQ(m.count_layers(AttentionKind::full), 4U);
  EXPECT_EQ(m.count_layers(AttentionKind::mamba), 28U);
  EXPECT_EQ(m.layers[4].attention, AttentionKind::full);
  EXPECT_EQ(m.layers[12].attention, AttentionKind::full);
  EXPECT_EQ(m.ssm.kind, SsmSpec::Kind::mamba1);
  EXPECT_EQ(m.ssm.d_state, 16U);
  EXPECT_EQ(m.ssm.d_conv, 4U);
  EXPECT_EQ(m.ssm.d_inner, 8192U);
  EXPECT_EQ(m.ssm.dt_rank, 256U);
  EXPECT_EQ(m.moe.n_expert, 16U);
  EXPECT_EQ(m.moe.n_expert_used, 2U);
  EXPECT_FALSE(m.layers[0].moe);  // expert_layer_period 2, offset 1
  EXPECT_TRUE(m.layers[1].moe);
  size_t n_moe = 0;
  for (const auto& l : m.layers)
    n_moe += l.moe ? 1 : 0;
  EXPECT_EQ(n_moe, 16U);
}

TEST(HfConfig, GptOssSlidingAndMxfp4) {
  const auto m = load_hf_fixture("gpt-oss-20b.json");
  EXPECT_EQ(m.head_dim, 64U);
  EXPECT_TRUE(m.attention_bias);
  EXPECT_TRUE(m.o_bias);
  EXPECT_EQ(m.count_layers(AttentionKind::sliding), 12U);
  EXPECT_EQ(m.layers[0].attention, AttentionKind::sliding);
  EXPECT_EQ(m.layers[0].window_tokens, 128U);
  EXPECT_EQ(m.layers[1].attention, AttentionKind::full);
  EXPECT_EQ(m.moe.n_expert, 32U);
  EXPECT_EQ(m.moe.n_expert_used, 4U);
  EXPECT_EQ(m.moe.expert_intermediate_size, 2880U);
  EXPECT_TRUE(m.moe.router_bias);
  EXPECT_TRUE(m.moe.expert_bias);
  EXPECT_EQ(m.quant.method, QuantMethod::mxfp4);
  EXPECT_EQ(m.quant.weight_bits, 4U);
  EXPECT_EQ(m.quant.group_size, 32);
  ASSERT_EQ(m.quant.ignored_modules.size(), 4U);
  EXPECT_EQ(m.quant.ignored_modules[3], "lm_head");
}

TEST(HfConfig, Llama4ScoutChunkedAndInterleavedMoe) {
  const auto m = load_hf_fixture("llama-4-scout.json");
  EXPECT_EQ(m.model_type, "llama4_text");
  EXPECT_EQ(m.n_layer, 48U);
  EXPECT_EQ(m.intermediate_size, 16384U);  // intermediate_size_mlp: dense layers
  EXPECT_EQ(m.moe.n_expert, 16U);
  EXPECT_EQ(m.moe.n_expert_used, 1U);
  EXPECT_EQ(m.moe.expert_intermediate_size, 8192U);
  EXPECT_EQ(m.moe.n_shared_expert, 1U);
  for (const auto& l : m.layers)
    EXPECT_TRUE(l.moe);  // interleave_moe_layer_step 1
  // no_rope_layers [] -> every 4th layer is a NoPE full-attention layer, the rest chunked.
  EXPECT_EQ(m.count_layers(AttentionKind::full), 12U);
  EXPECT_EQ(m.count_layers(AttentionKind::chunked), 36U);
  EXPECT_EQ(m.layers[3].attention, AttentionKind::full);
  EXPECT_EQ(m.layers[0].window_tokens, 8192U);
  EXPECT_FALSE(m.qk_norm);  // Llama 4's qk norm has no weights
  EXPECT_GT(m.extra_params, 300'000'000U);
  EXPECT_LT(m.extra_params, 1'500'000'000U);
}

TEST(HfConfig, Llama4MaverickAlternatesMoe) {
  auto c = hf_fixture_json("llama-4-scout.json");
  c["text_config"]["interleave_moe_layer_step"] = 2;
  const auto m = parse_hf_config(c, "t").value();
  EXPECT_FALSE(m.layers[0].moe);
  EXPECT_TRUE(m.layers[1].moe);
  c["text_config"]["no_rope_layers"] = json::array();
  for (int i = 0; i < 48; ++i)
    c["text_config"]["no_rope_layers"].push_back(i == 0 ? 0 : 1);
  const auto m2 = parse_hf_config(c, "t").value();
  EXPECT_EQ(m2.count_layers(AttentionKind::full), 1U);
}

TEST(HfConfig, GraniteHybridMamba2) {
  const auto m = load_hf_fixture("granitemoehybrid-synthetic.json");
  EXPECT_EQ(m.count_layers(AttentionKind::full), 4U);
  EXPECT_EQ(m.count_layers(AttentionKind::mamba), 36U);
  EXPECT_EQ(m.ssm.kind, SsmSpec::Kind::mamba2);
  EXPECT_EQ(m.ssm.n_heads, 128U);
  EXPECT_EQ(m.ssm.head_dim, 64U);
  EXPECT_EQ(m.ssm.d_inner, 8192U);
  EXPECT_EQ(m.ssm.d_state, 128U);
  EXPECT_EQ(m.ssm.n_groups, 1U);
  EXPECT_EQ(m.rotary_dim, 0U);  // position_embedding_type: nope
  EXPECT_EQ(m.moe.n_expert, 72U);
  EXPECT_EQ(m.moe.n_shared_expert, 1U);
  EXPECT_EQ(m.moe.shared_expert_intermediate_size, 1536U);
}

TEST(HfConfig, NemotronHPatternFoldsBlocks) {
  json c = {{"model_type", "nemotron_h"},
            {"hidden_size", 1024},
            {"num_attention_heads", 8},
            {"num_key_value_heads", 2},
            {"vocab_size", 1000},
            {"num_hidden_layers", 7},
            {"intermediate_size", 4096},
            {"hybrid_override_pattern", "M-M*-M-"},
            {"mamba_num_heads", 32},
            {"mamba_head_dim", 64},
            {"n_groups", 8},
            {"ssm_state_size", 128},
            {"conv_kernel", 4},
            {"torch_dtype", "bfloat16"}};
  const auto m = parse_hf_config(c, "t").value();
  EXPECT_EQ(m.n_layer, 4U);
  EXPECT_EQ(m.count_layers(AttentionKind::mamba), 3U);
  EXPECT_EQ(m.count_layers(AttentionKind::full), 1U);
  EXPECT_EQ(m.ssm.kind, SsmSpec::Kind::mamba2);
  EXPECT_EQ(m.ssm.n_groups, 8U);
  EXPECT_EQ(m.mlp_matrices, 2U);
  // 3 '-' blocks over 4 folded layers: the MLP width shrinks so the MLP parameters stay exact.
  EXPECT_EQ(m.intermediate_size, 3072U);
  EXPECT_TRUE(has_warning(m, "hybrid_override_pattern"));
  c["hybrid_override_pattern"] = "M-M";
  expect_input_error(c, "hybrid_override_pattern");
}

TEST(HfConfig, Phi2AllBiasesParallelPartialRotary) {
  const auto m = load_hf_fixture("phi-2.json");
  EXPECT_EQ(m.n_head_kv, 32U);  // num_key_value_heads: null -> MHA
  EXPECT_EQ(m.head_dim, 80U);
  EXPECT_EQ(m.rotary_dim, 32U);
  EXPECT_EQ(m.mlp_matrices, 2U);
  EXPECT_TRUE(m.attention_bias);
  EXPECT_TRUE(m.o_bias);
  EXPECT_TRUE(m.mlp_bias);
  EXPECT_TRUE(m.layer_norm_bias);
  EXPECT_TRUE(m.parallel_attn_mlp);
  EXPECT_EQ(m.norms_per_layer, 1U);
  EXPECT_EQ(m.dtype, DType::f16);
}

TEST(HfConfig, Gpt2LearnedPositionsAndGptNames) {
  const auto m = load_hf_fixture("gpt2.json");
  EXPECT_EQ(m.n_layer, 12U);
  EXPECT_EQ(m.hidden_size, 768U);
  EXPECT_EQ(m.n_head, 12U);
  EXPECT_EQ(m.intermediate_size, 3072U);
  EXPECT_EQ(m.max_position_embeddings, 1024U);
  EXPECT_TRUE(m.learned_positions);
  EXPECT_EQ(m.rotary_dim, 0U);
  EXPECT_EQ(m.mlp_matrices, 2U);
  EXPECT_TRUE(m.tie_word_embeddings);
  EXPECT_TRUE(has_warning(m, "torch_dtype"));  // no torch_dtype: bf16 assumed
}

TEST(HfConfig, MultiQueryMeansOneKvHead) {
  json c = {
      {"model_type", "gpt_bigcode"}, {"n_embd", 2048},      {"n_head", 16},       {"n_layer", 4},
      {"vocab_size", 49152},         {"multi_query", true}, {"n_positions", 8192}};
  const auto m = parse_hf_config(c, "t").value();
  EXPECT_EQ(m.n_head_kv, 1U);
  EXPECT_TRUE(m.learned_positions);
}

TEST(HfConfig, AwqGptq) {
  const auto awq = load_hf_fixture("qwen2.5-7b-awq.json");
  EXPECT_EQ(awq.quant.method, QuantMethod::awq);
  EXPECT_EQ(awq.quant.weight_bits, 4U);
  EXPECT_EQ(awq.quant.group_size, 128);
  EXPECT_TRUE(awq.quant.zero_point);
  EXPECT_EQ(awq.dtype, DType::f16);
  const auto gptq = load_hf_fixture("qwen2.5-7b-gptq-int4.json");
  EXPECT_EQ(gptq.quant.method, QuantMethod::gptq);
  EXPECT_EQ(gptq.quant.weight_bits, 4U);
  EXPECT_EQ(gptq.quant.group_size, 128);
  EXPECT_FALSE(gptq.quant.act_order);
  EXPECT_FALSE(gptq.quant.zero_point);  // sym: true
}

TEST(HfConfig, CompressedTensorsSchemes) {
  const auto w8a8 = load_hf_fixture("llama-3.1-8b-w8a8.json");
  EXPECT_EQ(w8a8.quant.method, QuantMethod::compressed_tensors);
  EXPECT_EQ(w8a8.quant.weight_bits, 8U);
  EXPECT_EQ(w8a8.quant.activation_bits, 8U);
  EXPECT_FALSE(w8a8.quant.weight_float);
  EXPECT_EQ(w8a8.quant.group_size, -1);
  EXPECT_EQ(w8a8.quant.format, "int-quantized");
  EXPECT_EQ(w8a8.quant.ignored_modules, std::vector<std::string>{"lm_head"});
  EXPECT_FALSE(w8a8.quant.has_kv_cache_scheme);

  const auto w4a16 = load_hf_fixture("llama-3.1-8b-w4a16.json");
  EXPECT_EQ(w4a16.quant.weight_bits, 4U);
  EXPECT_EQ(w4a16.quant.activation_bits, 16U);
  EXPECT_EQ(w4a16.quant.group_size, 128);
  EXPECT_EQ(w4a16.quant.format, "pack-quantized");

  const auto fp8 = load_hf_fixture("llama-3.1-8b-fp8-dynamic.json");
  EXPECT_EQ(fp8.quant.weight_bits, 8U);
  EXPECT_TRUE(fp8.quant.weight_float);
  EXPECT_EQ(fp8.quant.activation_bits, 8U);
  EXPECT_TRUE(fp8.quant.has_kv_cache_scheme);
  EXPECT_EQ(fp8.quant.kv_cache_dtype_hint, DType::f8_e4m3);
}

TEST(HfConfig, BitsAndBytes4Bit) {
  const auto m = load_hf_fixture("llama-3.1-8b-bnb-4bit.json");
  EXPECT_EQ(m.quant.method, QuantMethod::bitsandbytes);
  EXPECT_EQ(m.quant.weight_bits, 4U);
  EXPECT_EQ(m.quant.format, "nf4+double_quant");
  auto c = hf_fixture_json("llama-3.1-8b-bnb-4bit.json");
  c["quantization_config"] = {{"quant_method", "bitsandbytes"},
                              {"load_in_8bit", true},
                              {"llm_int8_skip_modules", {"lm_head"}}};
  const auto m8 = parse_hf_config(c, "t").value();
  EXPECT_EQ(m8.quant.weight_bits, 8U);
  EXPECT_EQ(m8.quant.ignored_modules, std::vector<std::string>{"lm_head"});
}

TEST(HfConfig, ModelOptNvfp4) {
  auto c = hf_fixture_json("llama-3.1-8b.json");
  c["quantization_config"] = {{"quant_method", "modelopt"},
                              {"quant_algo", "NVFP4"},
                              {"group_size", 16},
                              {"kv_cache_quant_algo", "FP8"},
                              {"exclude_modules", {"lm_head"}}};
  const auto m = parse_hf_config(c, "t").value();
  EXPECT_EQ(m.quant.method, QuantMethod::nvfp4);
  EXPECT_EQ(m.quant.weight_bits, 4U);
  EXPECT_EQ(m.quant.group_size, 16);
  EXPECT_TRUE(m.quant.has_kv_cache_scheme);
}

TEST(HfConfig, NewerDtypeFieldAndUnknownDtype) {
  auto c = hf_fixture_json("llama-3.1-8b.json");
  c.erase("torch_dtype");
  c["dtype"] = "float16";
  EXPECT_EQ(parse_hf_config(c, "t").value().dtype, DType::f16);
  c["dtype"] = "complex128";
  const auto m = parse_hf_config(c, "t").value();
  EXPECT_EQ(m.dtype, DType::bf16);
  EXPECT_TRUE(has_warning(m, "complex128"));
}

TEST(HfConfig, UnknownArchitectureParsesWithWarning) {
  auto c = hf_fixture_json("llama-3.1-8b.json");
  c["model_type"] = "frobnicator";
  c["architectures"] = {"FrobnicatorForCausalLM"};
  const auto m = parse_hf_config(c, "t").value();
  EXPECT_EQ(m.n_layer, 32U);
  ASSERT_FALSE(m.warnings.empty());
  EXPECT_NE(m.warnings.front().find("unknown architecture FrobnicatorForCausalLM"),
            std::string::npos);
}

TEST(HfConfig, MissingRequiredFieldsAreNamed) {
  for (const auto* field :
       {"num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"}) {
    auto c = hf_fixture_json("llama-3.1-8b.json");
    c.erase(field);
    expect_input_error(c, field);
  }
}

TEST(HfConfig, ContradictoryFieldsAreNamed) {
  auto c = hf_fixture_json("llama-3.1-8b.json");
  c["num_key_value_heads"] = 5;
  expect_input_error(c, "num_key_value_heads");
  c = hf_fixture_json("llama-3.1-8b.json");
  c.erase("head_dim");
  c["num_attention_heads"] = 30;
  c["num_key_value_heads"] = 30;
  expect_input_error(c, "hidden_size");
  c = hf_fixture_json("llama-3.1-8b.json");
  c["num_hidden_layers"] = 0;
  expect_input_error(c, "num_hidden_layers");
  c["num_hidden_layers"] = 20'000'000;
  expect_input_error(c, "num_hidden_layers");
  c["num_hidden_layers"] = -3;
  expect_input_error(c, "num_hidden_layers");
  c["num_hidden_layers"] = "32";
  expect_input_error(c, "num_hidden_layers");
  c["num_hidden_layers"] = 32.5;
  expect_input_error(c, "num_hidden_layers");
  c = hf_fixture_json("llama-3.1-8b.json");
  c["tie_word_embeddings"] = "no";
  expect_input_error(c, "tie_word_embeddings");
}

TEST(HfConfig, UnknownQuantMethodIsNamed) {
  auto c = hf_fixture_json("llama-3.1-8b.json");
  c["quantization_config"] = {{"quant_method", "hqq-turbo"}, {"bits", 3}};
  expect_input_error(c, "hqq-turbo");
}

TEST(HfConfig, BadJsonReportsPosition) {
  auto spec = parse_hf_config_text("{\"hidden_size\": 4096,\n \"x\": tru }", "cfg.json");
  ASSERT_FALSE(spec);
  EXPECT_EQ(spec.error().kind, ErrorKind::input);
  EXPECT_NE(spec.error().message.find("line 2"), std::string::npos) << spec.error().message;
  EXPECT_NE(spec.error().message.find("cfg.json"), std::string::npos);
  auto arr = parse_hf_config_text("[1, 2]", "a.json");
  ASSERT_FALSE(arr);
  EXPECT_NE(arr.error().message.find("object"), std::string::npos);
}

TEST(HfConfig, HugeAndDeepInputsAreRefused) {
  std::string huge(16 * 1024 * 1024 + 1, ' ');
  auto spec = parse_hf_config_text(huge, "big.json");
  ASSERT_FALSE(spec);
  EXPECT_NE(spec.error().message.find("16 MiB"), std::string::npos);
  std::string deep(100'000, '[');
  auto deep_spec = parse_hf_config_text(deep, "deep.json");
  ASSERT_FALSE(deep_spec);
  EXPECT_EQ(deep_spec.error().kind, ErrorKind::input);
}

TEST(HfConfig, EveryCatalogConfigParses) {
  std::ifstream in(std::string(KVPROF_SOURCE_DIR) + "/data/models.json");
  ASSERT_TRUE(in.good());
  const auto doc = json::parse(in);
  size_t n = 0;
  for (const auto& entry : doc.at("models")) {
    const auto id = entry.at("id").get<std::string>();
    const auto m = parse_hf_config(entry.at("config"), id);
    ASSERT_TRUE(m) << id << ": " << m.error().message;
    EXPECT_EQ(m->layers.size(), m->n_layer) << id;
    EXPECT_GT(m->head_dim, 0U) << id;
    EXPECT_FALSE(has_warning(*m, "unknown architecture")) << id;
    ++n;
  }
  EXPECT_GT(n, 0U);
}

}  // namespace
}  // namespace kvprof::model
