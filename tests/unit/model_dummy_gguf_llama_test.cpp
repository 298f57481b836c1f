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
#include "support/llama_dl.hpp"

namespace {

namespace fs = std::filesystem;
using kvprof::model::DummyGgufOptions;

struct Case {
  const char* name;
  const char* config;  // HF config.json
  const char* arch;    // expected llama.cpp architecture
};

constexpr uint32_t k_vocab = 1024;

const Case k_cases[] = {
    {"llama",
     R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":2048,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})",
     "llama"},
    {"mistral",
     R"({"architectures":["MistralForCausalLM"],"model_type":"mistral","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":1,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":2048,
        "sliding_window":null,"torch_dtype":"bfloat16"})",
     "llama"},
    {"mixtral",
     R"({"architectures":["MixtralForCausalLM"],"model_type":"mixtral","hidden_size":128,
        "intermediate_size":64,"num_attention_heads":4,"num_key_value_heads":2,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":2048,
        "num_local_experts":4,"num_experts_per_tok":2,"torch_dtype":"bfloat16"})",
     "llama"},
    {"qwen2",
     R"({"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":2048,
        "tie_word_embeddings":true,"torch_dtype":"bfloat16"})",
     "qwen2"},
    {"qwen3",
     R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":64,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":2048,
        "tie_word_embeddings":true,"torch_dtype":"bfloat16"})",
     "qwen3"},
    {"qwen3moe",
     R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe","hidden_size":128,
        "intermediate_size":256,"moe_intermediate_size":64,"num_experts":8,
        "num_experts_per_tok":2,"decoder_sparse_step":1,"mlp_only_layers":[],
        "num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"num_hidden_layers":2,
        "vocab_size":1024,"max_position_embeddings":2048,"tie_word_embeddings":false,
        "torch_dtype":"bfloat16"})",
     "qwen3moe"},
    {"phi3",
     R"({"architectures":["Phi3ForCausalLM"],"model_type":"phi3","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":4,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":4096,
        "sliding_window":2047,"tie_word_embeddings":false,"torch_dtype":"bfloat16"})",
     "phi3"},
    {"gemma2",
     R"({"architectures":["Gemma2ForCausalLM"],"model_type":"gemma2","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":2048,
        "sliding_window":64,"query_pre_attn_scalar":32,"torch_dtype":"bfloat16"})",
     "gemma2"},
    {"gemma3",
     R"({"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":32,
        "num_hidden_layers":3,"vocab_size":1024,"max_position_embeddings":2048,
        "sliding_window":64,"sliding_window_pattern":2,"query_pre_attn_scalar":32,
        "torch_dtype":"bfloat16"})",
     "gemma3"},
};

class DummyGgufLlama : public testing::TestWithParam<Case> {
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
  EXPECT_EQ(lib.vocab_n_tokens(vocab), static_cast<int32_t>(k_vocab));
  const std::string text = kvprof::model::dummy_prompt(7, k_vocab);
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
  for (uint32_t i = 0; i < k_vocab; ++i) {
    finite += std::isfinite(logits[i]) ? 1 : 0;
    max_abs = std::max(max_abs, std::fabs(logits[i]));
  }
  EXPECT_EQ(finite, static_cast<int>(k_vocab));
  EXPECT_GT(max_abs, 0.0F);  // random weights give non-constant logits
  lib.free_context(ctx);
  lib.model_free(model);
}

TEST_P(DummyGgufLlama, LoadsTokenizesAndDecodes) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib);
  const Case& c = GetParam();
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

INSTANTIATE_TEST_SUITE_P(Archs, DummyGgufLlama, testing::ValuesIn(k_cases),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

}  // namespace
