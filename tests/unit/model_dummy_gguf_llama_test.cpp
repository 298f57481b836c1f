// Dummy GGUFs through the real llama.cpp (tests/support/llama_dl.hpp): for each architecture a
// tiny config is written, make-gguf's planner and writer produce the file, libllama loads it
// (the model buffer it logs must equal kvprof's tensor bytes), tokenizes a text of dummy words
// to one token per word, and decodes to finite logits.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kvprof/model/dummy_gguf.hpp"
#include "kvprof/model/dummy_vocab.hpp"
#include "kvprof/model/resolve.hpp"
#include "support/dummy_model_configs.hpp"
#include "support/llama_dl.hpp"

namespace {

namespace fs = std::filesystem;
using kvprof::model::DummyGgufOptions;
using kvprof::test::k_dummy_cases;
using kvprof::test::k_dummy_vocab_size;

class DummyGgufLlama : public ::testing::TestWithParam<kvprof::test::DummyCase> {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("kvprof-dummy-llama-" + std::to_string(::getpid()) + "-" + GetParam().name);
    fs::create_directories(m_dir);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }
  fs::path m_dir;
};

// Loads `file` and checks buffer sizes, tokenizer and a decode; `tensor_bytes` from kvprof.
void check_in_llama(kvprof::test::LlamaLib& lib, const fs::path& file, uint64_t tensor_bytes) {
  lib.clear_log();
  void* model = lib.model_load_from_file(file.c_str(), lib.model_default_params());
  const std::string log = lib.log();
  ASSERT_NE(model, nullptr) << "libllama rejected the file:\n" << log;
  EXPECT_EQ(lib.model_size(model), tensor_bytes);
  const double mib = kvprof::test::LlamaLib::model_buffer_mib(log);
  EXPECT_NEAR(mib, static_cast<double>(tensor_bytes) / (1 << 20), 0.0051) << log;

  const void* vocab = lib.model_get_vocab(model);
  EXPECT_EQ(lib.vocab_n_tokens(vocab), static_cast<int32_t>(k_dummy_vocab_size));
  const std::string text = kvprof::model::dummy_prompt(7, k_dummy_vocab_size);
  std::vector<int32_t> tokens(64);
  const int32_t n = lib.tokenize(vocab, text.c_str(), static_cast<int32_t>(text.size()),
                                 tokens.data(), static_cast<int32_t>(tokens.size()), true, false);
  ASSERT_EQ(n, 8) << text;  // BOS + one token per word
  EXPECT_EQ(tokens[0], 1);
  for (int32_t i = 1; i < n; ++i)
    EXPECT_EQ(tokens[i], static_cast<int32_t>(kvprof::model::k_dummy_first_word_id) + i - 1);

  void* ctx = lib.new_context(model, 64);
  ASSERT_NE(ctx, nullptr) << lib.log();
  ASSERT_EQ(lib.decode(ctx, lib.batch_get_one(tokens.data(), n)), 0) << lib.log();
  int32_t next = tokens[1];
  ASSERT_EQ(lib.decode(ctx, lib.batch_get_one(&next, 1)), 0) << lib.log();
  const float* logits = lib.get_logits_ith(ctx, -1);
  ASSERT_NE(logits, nullptr);
  int finite = 0;
  float max_abs = 0;
  for (uint32_t i = 0; i < k_dummy_vocab_size; ++i) {
    finite += std::isfinite(logits[i]) ? 1 : 0;
    max_abs = std::max(max_abs, std::fabs(logits[i]));
  }
  EXPECT_EQ(finite, static_cast<int>(k_dummy_vocab_size));
  EXPECT_GT(max_abs, 0.0F);  // random weights give non-constant logits
  lib.free_context(ctx);
  lib.model_free(model);
}

TEST_P(DummyGgufLlama, LoadsTokenizesAndDecodes) {
  KVPROF_REQUIRE_LLAMA_LIB_OR_SKIP(lib);
  const kvprof::test::DummyCase& c = GetParam();
  const fs::path config = m_dir / "config.json";
  std::ofstream(config) << c.config;
  const auto spec = kvprof::model::load_model(config.string());
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  for (const char* type : {"f16", "q8_0"}) {
    SCOPED_TRACE(type);
    const DummyGgufOptions options{*kvprof::model::parse_dummy_type(type), 7};
    const auto plan = kvprof::model::plan_dummy_gguf(*spec, options);
    ASSERT_TRUE(plan.has_value()) << plan.error().message;
    EXPECT_EQ(plan->arch, c.arch);
    const fs::path file = m_dir / (std::string(type) + ".gguf");
    const auto summary = kvprof::model::write_dummy_gguf(*plan, options, file);
    ASSERT_TRUE(summary.has_value()) << summary.error().message;
    check_in_llama(*lib, file, summary->tensor_bytes);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, DummyGgufLlama, ::testing::ValuesIn(k_dummy_cases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
