// model/gguf_mix.cpp: the types llama-quantize gives each tensor of a mix, on a llama-shaped
// tensor list (checked by hand against llama.cpp's rules), and the what-if estimate of an
// unquantized model equal to the GGUF make-gguf writes for the same mix.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/model/gguf.hpp"
#include "kvprof/model/gguf_mix.hpp"
#include "support/run_kvprof.hpp"
#include "support/temp_dir.hpp"

namespace kvprof::model {
namespace {

// A llama-shaped model of `n_layer` blocks as llama.cpp's converter names its tensors.
std::vector<MixTensor> llama_tensors(uint32_t n_layer, bool tied) {
  std::vector<MixTensor> t = {{"token_embd.weight", {256, 1000}}};
  for (uint32_t i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    for (const char* n : {"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                          "ffn_gate.weight", "ffn_up.weight"})
      t.push_back({b + n, {256, 256}});
    t.push_back({b + "ffn_down.weight", {768, 256}});
    t.push_back({b + "attn_norm.weight", {256}});
  }
  t.push_back({"output_norm.weight", {256}});
  if (!tied) t.push_back({"output.weight", {256, 1000}});
  return t;
}

std::string type_of(const std::vector<MixTensor>& t, const std::vector<uint32_t>& types,
                    const std::string& name) {
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i].name == name) return std::string(ggml_type_name(types[i]).value_or("?"));
  return "missing";
}

TEST(GgufMix, Q4KMGivesSomeLayersMoreBitsAndTheOutputQ6K) {
  const auto mix = find_gguf_mix("q4_k_m");
  ASSERT_TRUE(mix);
  EXPECT_EQ(mix->file_type, 15U);
  const auto t = llama_tensors(16, false);
  const auto types = assign_mix_types(*mix, {"llama", 16, 0, 4}, t);
  // use_more_bits over 16 layers: the first and last 2, then every third from layer 4.
  for (uint32_t i = 0; i < 16; ++i) {
    const bool more = i < 2 || i >= 14 || (i - 2) % 3 == 2;
    const std::string b = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(type_of(t, types, b + "attn_v.weight"), more ? "Q6_K" : "Q4_K") << i;
    EXPECT_EQ(type_of(t, types, b + "ffn_down.weight"), more ? "Q6_K" : "Q4_K") << i;
    EXPECT_EQ(type_of(t, types, b + "attn_q.weight"), "Q4_K") << i;
    EXPECT_EQ(type_of(t, types, b + "attn_norm.weight"), "F32") << i;
  }
  EXPECT_EQ(type_of(t, types, "output.weight"), "Q6_K");
  EXPECT_EQ(type_of(t, types, "token_embd.weight"), "Q4_K");
  EXPECT_EQ(type_of(t, types, "output_norm.weight"), "F32");
}

TEST(GgufMix, TiedEmbeddingsTakeTheOutputTypeAndQ8_0StaysQ8_0) {
  const auto tied = llama_tensors(4, true);
  const auto q4 = assign_mix_types(*find_gguf_mix("Q4_0"), {"llama", 4, 0, 4}, tied);
  EXPECT_EQ(type_of(tied, q4, "token_embd.weight"), "Q6_K");
  EXPECT_EQ(type_of(tied, q4, "blk.0.attn_v.weight"), "Q4_0");
  const auto q8 = assign_mix_types(*find_gguf_mix("Q8_0"), {"llama", 4, 0, 4}, tied);
  EXPECT_EQ(type_of(tied, q8, "token_embd.weight"), "Q8_0");
}

TEST(GgufMix, RowsThatAreNotWholeBlocksFallBack) {
  // 128-element rows: no whole Q4_K (256) block -> Q5_0; Q6_K -> Q8_0.
  const std::vector<MixTensor> t = {{"blk.0.ffn_down.weight", {128, 256}},
                                    {"blk.0.attn_q.weight", {128, 128}},
                                    {"blk.0.ffn_gate_inp.weight", {256, 8}}};
  const auto types = assign_mix_types(*find_gguf_mix("q4_k_m"), {"llama", 1, 0, 1}, t);
  EXPECT_EQ(type_of(t, types, "blk.0.ffn_down.weight"), "Q8_0");  // Q6_K (layer 0) -> Q8_0
  EXPECT_EQ(type_of(t, types, "blk.0.attn_q.weight"), "Q5_0");
  EXPECT_EQ(type_of(t, types, "blk.0.ffn_gate_inp.weight"), "F32");  // routers stay
}

TEST(GgufMix, EightExpertsAnd70BRules) {
  const auto t = llama_tensors(80, false);
  const auto big = assign_mix_types(*find_gguf_mix("Q4_K_M"), {"llama", 80, 0, 8}, t);
  EXPECT_EQ(type_of(t, big, "blk.31.attn_v.weight"),
            "Q5_K");  // 70B: Q4_K -> Q5_K (layer 31 gets no extra bits)
  const auto moe = assign_mix_types(*find_gguf_mix("Q4_K_M"), {"llama", 80, 8, 8}, t);
  EXPECT_EQ(type_of(t, moe, "blk.31.attn_v.weight"), "Q8_0");
  EXPECT_EQ(type_of(t, moe, "blk.31.attn_k.weight"), "Q8_0");
  EXPECT_EQ(type_of(t, moe, "blk.31.attn_output.weight"), "Q5_K");
  EXPECT_FALSE(find_gguf_mix("q3_k_xl"));
}

class GgufMixCli : public test::TempDirTest {
 protected:
  GgufMixCli() : TempDirTest("kvprof_gguf_mix") {}
};

// `estimate --engine llamacpp -q MIX` on a config prices the weights exactly as the GGUF
// `make-gguf --type MIX` writes (which libllama loads: PlanVsLlama checks its buffers).
TEST_F(GgufMixCli, WhatIfEqualsTheFileMakeGgufWrites) {
  const auto config = m_dir / "config.json";
  std::ofstream(config)
      << R"({"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":256,
            "intermediate_size":768,"num_attention_heads":8,"num_key_value_heads":2,
            "num_hidden_layers":10,"vocab_size":6144,"max_position_embeddings":8192,
            "tie_word_embeddings":true,"torch_dtype":"bfloat16"})";
  const auto weights = [&](const std::string& args) {
    const auto r = test::run_kvprof("estimate --engine llamacpp --json " + args);
    EXPECT_EQ(r.rc, 0) << r.out;
    return test::json_in(r.out)["per_gpu"]["weights_bytes"];
  };
  for (const char* mix : {"Q4_K_M", "q5_k_s", "Q8_0", "Q6_K"}) {
    const auto file = m_dir / (std::string(mix) + ".gguf");
    const auto made = test::run_kvprof("make-gguf -m " + config.string() + " -o " + file.string() +
                                       " --type " + mix);
    ASSERT_EQ(made.rc, 0) << made.out;
    EXPECT_EQ(weights("-m " + config.string() + " -q " + mix), weights("-m " + file.string()))
        << mix;
  }
  // A mix needs an unquantized model and the llama.cpp engine.
  const auto gguf = m_dir / "Q8_0.gguf";
  EXPECT_EQ(test::run_kvprof("estimate --engine llamacpp -m " + gguf.string() + " -q Q4_K_M").rc,
            2);
  const auto vllm = test::run_kvprof("estimate -m " + config.string() + " -q Q4_K_M");
  EXPECT_EQ(vllm.rc, 2);
  EXPECT_NE(vllm.out.find("--engine llamacpp"), std::string::npos) << vllm.out;
}

}  // namespace
}  // namespace kvprof::model
