// Tests of src/kvprof/model/dummy_gguf.cpp, gguf_writer.cpp, dummy_weights.cpp and
// dummy_vocab.cpp: make-gguf files read back by kvprof's own GGUF reader give the spec's dims,
// tensors and exact bytes; data is deterministic and sane; failures leave no file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "kvprof/model/dummy_gguf.hpp"
#include "kvprof/model/dummy_vocab.hpp"
#include "kvprof/model/dummy_weights.hpp"
#include "kvprof/model/gguf.hpp"
#include "kvprof/model/resolve.hpp"
#include "support/dummy_model_configs.hpp"
#include "support/test_data.hpp"

namespace kvprof::model {
namespace {

namespace fs = std::filesystem;

// A GgufWriter fill that sets every data byte to `value`.
auto fill_with(uint8_t value) {
  return [value](size_t, uint64_t, std::span<uint8_t> out) {
    std::fill(out.begin(), out.end(), value);
  };
}

class DummyGguf : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("kvprof-dummy-gguf-" + std::to_string(::getpid()));
    fs::create_directories(m_dir);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }
  ModelSpec tiny(const test::DummyCase& c) {
    const fs::path config = m_dir / (std::string(c.name) + ".json");
    std::ofstream(config) << c.config;
    auto spec = load_model(config.string());
    EXPECT_TRUE(spec.has_value()) << c.name << ": " << spec.error().message;
    return spec ? *spec : ModelSpec{};
  }
  fs::path m_dir;
};

std::vector<uint8_t> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(DummyGguf, RoundTripThroughKvprofReaderEveryArchitecture) {
  for (const auto& c : test::k_dummy_cases) {
    SCOPED_TRACE(c.name);
    const ModelSpec spec = tiny(c);
    for (const char* type : {"f16", "q4_0", "bf16"}) {
      SCOPED_TRACE(type);
      const DummyGgufOptions options{*parse_dummy_type(type), 1};
      const auto plan = plan_dummy_gguf(spec, options);
      ASSERT_TRUE(plan.has_value()) << plan.error().message;
      EXPECT_EQ(plan->arch, c.arch);
      const fs::path file = m_dir / "out.gguf";
      const auto summary = write_dummy_gguf(*plan, options, file);
      ASSERT_TRUE(summary.has_value()) << summary.error().message;
      EXPECT_EQ(fs::file_size(file), summary->file_bytes);

      const auto gguf = read_gguf(file);
      ASSERT_TRUE(gguf.has_value()) << gguf.error().message;
      const auto back = model_from_gguf(*gguf, file.string());
      ASSERT_TRUE(back.has_value()) << back.error().message;
      EXPECT_EQ(back->architecture, c.arch);
      EXPECT_EQ(back->n_layer, spec.n_layer);
      EXPECT_EQ(back->hidden_size, spec.hidden_size);
      EXPECT_EQ(back->n_head, spec.n_head);
      EXPECT_EQ(back->n_head_kv, spec.n_head_kv);
      EXPECT_EQ(back->head_dim, spec.head_dim);
      EXPECT_EQ(back->vocab_size, test::k_dummy_vocab_size);
      EXPECT_EQ(back->tie_word_embeddings, spec.tie_word_embeddings || plan->arch == "gemma2");
      EXPECT_EQ(back->qk_norm, spec.qk_norm);
      EXPECT_EQ(back->attention_bias, spec.attention_bias);
      EXPECT_EQ(back->moe.n_expert, spec.moe.n_expert);
      EXPECT_EQ(back->moe.n_expert_used, spec.moe.n_expert_used);
      if (spec.is_moe()) {
        EXPECT_EQ(back->moe.expert_intermediate_size, spec.moe.expert_intermediate_size);
      } else {
        EXPECT_EQ(back->intermediate_size, spec.intermediate_size);
      }
      EXPECT_EQ(gguf->array_length("tokenizer.ggml.tokens"), test::k_dummy_vocab_size);

      const auto& planned = plan->writer.tensors();
      ASSERT_EQ(gguf->tensors.size(), planned.size());
      uint64_t sum = 0;
      for (size_t i = 0; i < planned.size(); ++i) {
        EXPECT_EQ(gguf->tensors[i].name, planned[i].name);
        EXPECT_EQ(gguf->tensors[i].shape, planned[i].shape) << planned[i].name;
        EXPECT_EQ(gguf->tensor_types[i], planned[i].ggml_type) << planned[i].name;
        EXPECT_EQ(gguf->tensors[i].bytes, planned[i].bytes) << planned[i].name;
        EXPECT_EQ(gguf->tensor_offsets[i], planned[i].offset) << planned[i].name;
        sum += gguf->tensors[i].bytes;
      }
      EXPECT_EQ(sum, summary->tensor_bytes);
      EXPECT_EQ(gguf->data_offset + plan->writer.data_bytes(), fs::file_size(file));
    }
  }
}

TEST_F(DummyGguf, CatalogModelsHaveTheBytesLibllamaReports) {
  // llama_model_size() of files make-gguf wrote, as the real libllama (0.5.0-dev) reported it.
  const DummyGgufOptions f16{*parse_dummy_type("f16"), 0};
  const auto qwen = plan_dummy_gguf(test::catalog_spec("qwen2.5-0.5b"), f16);
  ASSERT_TRUE(qwen.has_value()) << qwen.error().message;
  EXPECT_EQ(qwen->arch, "qwen2");
  EXPECT_EQ(qwen->tensor_bytes, 988'208'640U);
  EXPECT_EQ(qwen->writer.tensors().size(), 290U);  // 24 layers x 12 + embd + output_norm
  const auto llama =
      plan_dummy_gguf(test::catalog_spec("llama-3.2-1b"), {*parse_dummy_type("q8_0"), 0});
  ASSERT_TRUE(llama.has_value()) << llama.error().message;
  EXPECT_EQ(llama->tensor_bytes, 1'313'251'328U);
  const auto llama_q4 =
      plan_dummy_gguf(test::catalog_spec("llama-3.2-1b"), {*parse_dummy_type("q4_k"), 0});
  ASSERT_TRUE(llama_q4.has_value());
  EXPECT_EQ(llama_q4->tensor_bytes, 695'377'920U);
}

TEST_F(DummyGguf, QuantizedRowsThatAreNotWholeBlocksFallBack) {
  // qwen2.5-0.5b: hidden 896 is not a whole number of 256-element Q4_K blocks.
  const auto plan =
      plan_dummy_gguf(test::catalog_spec("qwen2.5-0.5b"), {*parse_dummy_type("q4_k"), 0});
  ASSERT_TRUE(plan.has_value());
  for (const auto& t : plan->writer.tensors()) {
    if (t.shape.size() < 2) {
      EXPECT_EQ(t.ggml_type, 0U) << t.name;  // norms and biases stay F32
    } else if (t.shape[0] % 256 == 0) {
      EXPECT_EQ(t.ggml_type, 12U) << t.name;  // Q4_K
    } else {
      EXPECT_EQ(t.ggml_type, 8U) << t.name;  // Q8_0
    }
  }
}

TEST_F(DummyGguf, DataIsDeterministicForASeedAndSane) {
  const ModelSpec spec = tiny(test::k_dummy_cases[0]);
  const auto write = [&](uint64_t seed, const char* name) {
    const DummyGgufOptions options{*parse_dummy_type("f16"), seed};
    const auto plan = plan_dummy_gguf(spec, options);
    EXPECT_TRUE(plan.has_value());
    EXPECT_TRUE(write_dummy_gguf(*plan, options, m_dir / name).has_value());
    return slurp(m_dir / name);
  };
  const auto a = write(5, "a.gguf"), b = write(5, "b.gguf"), c = write(6, "c.gguf");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a.size(), c.size());

  const auto gguf = read_gguf(m_dir / "a.gguf");
  ASSERT_TRUE(gguf.has_value());
  for (size_t i = 0; i < gguf->tensors.size(); ++i) {
    const uint8_t* data = a.data() + gguf->data_offset + gguf->tensor_offsets[i];
    const auto& t = gguf->tensors[i];
    const uint64_t n = t.bytes / (gguf->tensor_types[i] == 0 ? 4 : 2);
    double sum_abs = 0;
    for (uint64_t j = 0; j < n; ++j) {
      float v = 0;
      if (gguf->tensor_types[i] == 0) {
        std::memcpy(&v, data + j * 4, 4);
      } else {
        uint16_t h = 0;
        std::memcpy(&h, data + j * 2, 2);
        v = f16_bits_to_f32(h);
      }
      ASSERT_TRUE(std::isfinite(v)) << t.name;
      if (t.name.ends_with("norm.weight")) {
        ASSERT_EQ(v, 1.0F) << t.name;
      } else {
        ASSERT_LE(std::fabs(v), k_dummy_weight_range * 1.001F) << t.name;  // f16 rounding
      }
      sum_abs += std::fabs(v);
    }
    if (!t.name.ends_with("norm.weight")) {
      EXPECT_NEAR(sum_abs / static_cast<double>(n), k_dummy_weight_range / 2, 0.002) << t.name;
    }
  }
}

TEST(DummyWeights, QuantBlocksHaveSmallScales) {
  std::vector<uint8_t> q8(34 * 4), q4k(144 * 2);
  fill_dummy(8, DummyFill::random, 1, 0, q8);
  fill_dummy(12, DummyFill::random, 1, 0, q4k);
  uint16_t d = 0;
  std::memcpy(&d, q8.data() + 34, 2);
  EXPECT_FLOAT_EQ(f16_bits_to_f32(d), f16_bits_to_f32(f32_to_f16_bits(0.02F / 127)));
  std::memcpy(&d, q4k.data() + 144 + 2, 2);  // dmin of the second block
  EXPECT_GT(f16_bits_to_f32(d), 0.0F);
  EXPECT_LT(f16_bits_to_f32(d), 0.001F);
  EXPECT_EQ(f32_to_f16_bits(1.0F), 0x3C00);
  EXPECT_EQ(f32_to_f16_bits(-2.0F), 0xC000);
  EXPECT_EQ(f32_to_bf16_bits(1.0F), 0x3F80);
  EXPECT_EQ(f16_bits_to_f32(0x0001), std::ldexp(1.0F, -24));  // smallest subnormal
}

TEST(DummyVocab, LayoutAndPrompt) {
  const auto v = make_dummy_vocab(300);
  ASSERT_TRUE(v.has_value());
  ASSERT_EQ(v->tokens.size(), 300U);
  EXPECT_EQ(v->tokens[0], "<unk>");
  EXPECT_EQ(v->tokens[1], "<s>");
  EXPECT_EQ(v->tokens[3], "<0x00>");
  EXPECT_EQ(v->tokens[258], "<0xFF>");
  EXPECT_EQ(v->tokens[k_dummy_first_word_id], "\xE2\x96\x81w0");
  EXPECT_EQ(v->tokens[299], "\xE2\x96\x81w38");
  EXPECT_EQ(v->token_types[258], 6);
  EXPECT_EQ(dummy_prompt(3, 300), "w0 w1 w2");
  EXPECT_FALSE(make_dummy_vocab(299).has_value());
}

TEST(DummyGgufErrors, UnsupportedArchitectureNamesTheSupportedOnes) {
  const auto plan = plan_dummy_gguf(test::catalog_spec("deepseek-v3"), {});
  ASSERT_FALSE(plan.has_value());
  EXPECT_EQ(plan.error().kind, ErrorKind::input);
  EXPECT_NE(plan.error().message.find("deepseek_v3"), std::string::npos) << plan.error().message;
  EXPECT_NE(plan.error().message.find("qwen3moe"), std::string::npos) << plan.error().message;
  EXPECT_FALSE(parse_dummy_type("q5_k").has_value());
  EXPECT_EQ(*parse_dummy_type("Q4_K"), 12U);
}

TEST_F(DummyGguf, UnwritablePathFailsAndLeavesNoFile) {
  const DummyGgufOptions options{};
  const auto plan = plan_dummy_gguf(tiny(test::k_dummy_cases[0]), options);
  ASSERT_TRUE(plan.has_value());
  const auto r = write_dummy_gguf(*plan, options, m_dir / "missing" / "x.gguf");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, ErrorKind::io);
  EXPECT_NE(r.error().message.find("missing/x.gguf"), std::string::npos);

  GgufWriter w;
  ASSERT_TRUE(w.set_u32("a", 1).has_value());
  EXPECT_FALSE(w.set_u32("a", 2).has_value());
  EXPECT_FALSE(w.add_tensor(std::string(64, 'x'), 0, {4}).has_value());
  EXPECT_FALSE(w.add_tensor("q", 12, {128}).has_value());  // not whole Q4_K blocks
  ASSERT_TRUE(w.add_tensor("t", 0, {3}).has_value());
  EXPECT_FALSE(w.add_tensor("t", 0, {3}).has_value());
  ASSERT_TRUE(w.write(m_dir / "w.gguf", fill_with(0)).has_value());
  EXPECT_EQ(fs::file_size(m_dir / "w.gguf"), w.file_bytes());
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(m_dir))
    files += e.path().extension() == ".json" ? 0 : 1;
  EXPECT_EQ(files, 1U);  // only w.gguf: no temporary left behind
}

TEST_F(DummyGguf, TheWriterAloneWritesGeneralAlignment) {
  // A general.alignment of the caller's would tell readers to look for every tensor elsewhere
  // (found by the gguf_roundtrip fuzz target: general.alignment = 0 made the file unreadable).
  GgufWriter w;
  EXPECT_FALSE(w.set_u32("general.alignment", 0).has_value());
  EXPECT_FALSE(w.set_u32("general.alignment", 64).has_value());
  EXPECT_FALSE(w.set_string("general.alignment", "32").has_value());

  GgufWriter w64(64);
  ASSERT_TRUE(w64.set_u32("a", 1).has_value());
  ASSERT_TRUE(w64.add_tensor("t0", 0, {3}).has_value());
  ASSERT_TRUE(w64.add_tensor("t1", 0, {5}).has_value());
  ASSERT_TRUE(w64.write(m_dir / "a64.gguf", fill_with(7)).has_value());
  EXPECT_EQ(fs::file_size(m_dir / "a64.gguf"), w64.file_bytes());
  const auto back = read_gguf(m_dir / "a64.gguf");
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->alignment, 64U);
  ASSERT_NE(back->find("general.alignment"), nullptr);
  EXPECT_EQ(back->find("general.alignment")->as_uint(), 64U);
  ASSERT_EQ(back->tensor_offsets.size(), 2U);
  EXPECT_EQ(back->tensor_offsets[1], w64.tensors()[1].offset);
  EXPECT_EQ(back->tensor_offsets[1], 64U);  // 12 bytes of t0, then padding to 64
}

}  // namespace
}  // namespace kvprof::model
