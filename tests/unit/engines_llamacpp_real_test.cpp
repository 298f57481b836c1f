// The llama.cpp planner against the real libllama: dummy GGUFs of several architectures (dense
// GQA, MHA, q8_0 and q4_0 weights, sliding-window layers, MoE) under a grid of -c, -np, -fa,
// -ctk/-ctv, -b/-ub, --no-mmap and --swa-full. llama.cpp's own memory breakdown must equal the
// plan to the byte for weights, KV and the compute buffer; the bench process must grow by the
// planned host RAM within 10%.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvprof/engines/llamacpp/buffers.hpp"
#include "kvprof/llama/engine.hpp"
#include "kvprof/llama/memory.hpp"
#include "kvprof/model/dummy_gguf.hpp"
#include "kvprof/model/resolve.hpp"
#include "support/run_kvprof.hpp"
#include "support/tiny_llama.hpp"

namespace kvprof::engines {

namespace {
namespace fs = std::filesystem;

struct ModelCase {
  const char* name;
  const char* type;  // make-gguf --type
  const char* config;
};

// Small enough to load in milliseconds, wide enough that every stage of the graph matters.
const ModelCase k_models[] = {
    {"dense_gqa", "f16",
     R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":256,
        "intermediate_size":768,"num_attention_heads":8,"num_key_value_heads":2,
        "num_hidden_layers":4,"vocab_size":8192,"max_position_embeddings":8192,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})"},
    {"mha", "f16",
     R"({"architectures":["Phi3ForCausalLM"],"model_type":"phi3","hidden_size":256,
        "intermediate_size":512,"num_attention_heads":8,"num_key_value_heads":8,
        "num_hidden_layers":3,"vocab_size":4096,"max_position_embeddings":8192,
        "sliding_window":null,"tie_word_embeddings":false,"torch_dtype":"bfloat16"})"},
    {"dense_q8_0_tied", "q8_0",
     R"({"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":256,
        "intermediate_size":768,"num_attention_heads":8,"num_key_value_heads":2,
        "num_hidden_layers":3,"vocab_size":6144,"max_position_embeddings":8192,
        "tie_word_embeddings":true,"torch_dtype":"bfloat16"})"},
    {"dense_q4_0_repacked", "q4_0",
     R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":256,
        "intermediate_size":768,"num_attention_heads":8,"num_key_value_heads":2,
        "num_hidden_layers":4,"vocab_size":8192,"max_position_embeddings":8192,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})"},
    {"gemma2_sliding", "f16",
     R"({"architectures":["Gemma2ForCausalLM"],"model_type":"gemma2","hidden_size":256,
        "intermediate_size":512,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":64,
        "num_hidden_layers":4,"vocab_size":4096,"max_position_embeddings":8192,
        "sliding_window":128,"query_pre_attn_scalar":64,"torch_dtype":"bfloat16"})"},
    {"gemma3_sliding", "f16",
     R"({"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3_text","hidden_size":256,
        "intermediate_size":512,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":64,
        "num_hidden_layers":7,"vocab_size":4096,"max_position_embeddings":8192,
        "sliding_window":128,"sliding_window_pattern":6,"query_pre_attn_scalar":64,
        "torch_dtype":"bfloat16"})"},
    {"qwen3moe", "f16",
     R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe","hidden_size":256,
        "intermediate_size":512,"moe_intermediate_size":128,"num_experts":8,
        "num_experts_per_tok":2,"decoder_sparse_step":1,"mlp_only_layers":[],
        "num_attention_heads":8,"num_key_value_heads":2,"head_dim":32,"num_hidden_layers":3,
        "vocab_size":4096,"max_position_embeddings":8192,"tie_word_embeddings":false,
        "torch_dtype":"bfloat16"})"},
    // llama-quantize mixes: per-tensor types (Q6_K attn_v/ffn_down in some layers, a Q6_K output
    // layer), a fused QKV, and expert rows that are not whole K-blocks (Q5_K -> Q5_1).
    {"dense_q4_k_m", "q4_k_m",
     R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":256,
        "intermediate_size":768,"num_attention_heads":8,"num_key_value_heads":2,
        "num_hidden_layers":9,"vocab_size":8192,"max_position_embeddings":8192,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})"},
    {"mha_qkv_q6_k", "q6_k",
     R"({"architectures":["Phi3ForCausalLM"],"model_type":"phi3","hidden_size":256,
        "intermediate_size":512,"num_attention_heads":8,"num_key_value_heads":8,
        "num_hidden_layers":3,"vocab_size":4096,"max_position_embeddings":8192,
        "sliding_window":null,"tie_word_embeddings":false,"torch_dtype":"bfloat16"})"},
    {"qwen3moe_q5_k_m", "q5_k_m",
     R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe","hidden_size":256,
        "intermediate_size":512,"moe_intermediate_size":128,"num_experts":8,
        "num_experts_per_tok":2,"decoder_sparse_step":1,"mlp_only_layers":[],
        "num_attention_heads":8,"num_key_value_heads":2,"head_dim":32,"num_hidden_layers":3,
        "vocab_size":4096,"max_position_embeddings":8192,"tie_word_embeddings":true,
        "torch_dtype":"bfloat16"})"},
};

struct Setting {
  uint32_t n_ctx;
  uint32_t n_seq;
  bool fa;
  const char* ctk;
  const char* ctv;
  uint32_t n_batch;
  uint32_t n_ubatch;
  bool kv_unified = true;
  bool swa_full = false;
};

const Setting k_settings[] = {
    {512, 1, true, "f16", "f16", 2048, 512},
    {2048, 4, false, "q8_0", "f16", 2048, 512},
    {1000, 2, true, "q8_0", "q8_0", 2048, 256},
    {4096, 1, false, "f16", "f16", 256, 512},         // -b below -ub: the ubatch shrinks to 256
    {300, 1, true, "q4_0", "q4_0", 2048, 512},        // cells padded to 512; ubatch 300
    {2048, 4, true, "f16", "f16", 2048, 128, false},  // one KV stream per sequence
    {1536, 2, false, "f16", "f16", 2048, 256, true, true},  // --swa-full
};

class PlanVsLlama : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("kvprof-plan-llama-" + std::to_string(::getpid()) + "-" + GetParam().name);
    fs::create_directories(m_dir);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }
  fs::path m_dir;
};

// Writes the case's dummy GGUF; returns its path.
fs::path write_model(const fs::path& dir, const ModelCase& c) {
  const fs::path config = dir / "config.json";
  std::ofstream(config) << c.config;
  const auto spec = model::load_model(config.string());
  EXPECT_TRUE(spec.has_value()) << spec.error().message;
  const auto mix = model::find_gguf_mix(c.type);
  const model::DummyGgufOptions options{mix ? mix->default_type : *model::parse_dummy_type(c.type),
                                        3};
  const auto plan = model::plan_dummy_gguf(*spec, options, mix);
  EXPECT_TRUE(plan.has_value()) << plan.error().message;
  const fs::path file = dir / "model.gguf";
  const auto written = model::write_dummy_gguf(*plan, options, file);
  EXPECT_TRUE(written.has_value()) << written.error().message;
  return file;
}

uint64_t bytes_of(const std::vector<llama::BufferMemory>& b, const std::string& type,
                  uint64_t llama::BufferMemory::*field) {
  uint64_t n = 0;
  for (const auto& x : b) {
    if (x.buffer_type == type) n += x.*field;
  }
  return n;
}

TEST_P(PlanVsLlama, WeightsKvAndComputeToTheByte) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  const fs::path file = write_model(m_dir, GetParam());
  const auto spec = model::load_model(file.string());
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  llama::LlamaLibOptions lo;
  lo.path = lib_dir->string();
  auto lib = llama::LlamaLib::load(lo);
  ASSERT_TRUE(lib.has_value()) << lib.error().message;
  for (const bool mmap : {true, false}) {
    llama::LlamaSettings es;
    es.model_path = file.string();
    es.use_mmap = mmap;
    es.n_threads = 1;
    auto model = llama::LlamaModel::load(*lib, es);
    ASSERT_TRUE(model.has_value()) << model.error().message;
    for (const Setting& st : k_settings) {
      SCOPED_TRACE(testing::Message()
                   << "mmap=" << mmap << " -c " << st.n_ctx << " -np " << st.n_seq << " -fa "
                   << st.fa << " -ctk " << st.ctk << " -ctv " << st.ctv << " -b " << st.n_batch
                   << " -ub " << st.n_ubatch << " unified=" << st.kv_unified
                   << " swa_full=" << st.swa_full);
      es.n_ctx = st.n_ctx;
      es.n_seq_max = st.n_seq;
      es.flash_attn = st.fa ? llama::FlashAttn::on : llama::FlashAttn::off;
      es.cache_type_k = st.ctk;
      es.cache_type_v = st.ctv;
      es.n_batch = st.n_batch;
      es.n_ubatch = st.n_ubatch;
      es.kv_unified = st.kv_unified;
      es.swa_full = st.swa_full;
      auto ctx = llama::LlamaContext::create(**model, es);
      ASSERT_TRUE(ctx.has_value()) << ctx.error().message;
      const auto measured = llama::memory_breakdown(**lib, **ctx);
      ASSERT_FALSE(measured.empty());

      LlamaCppSettings ps;
      ps.n_ctx = st.n_ctx;
      ps.n_seq_max = st.n_seq;
      ps.n_batch = st.n_batch;
      ps.n_ubatch = st.n_ubatch;
      ps.flash_attn = st.fa;
      ps.type_k = static_cast<uint32_t>(*llama::kv_cache_type_id(st.ctk));
      ps.type_v = static_cast<uint32_t>(*llama::kv_cache_type_id(st.ctv));
      ps.use_mmap = mmap;
      ps.kv_unified = st.kv_unified;
      ps.swa_full = st.swa_full;
      const auto plan = plan_llamacpp(*spec, ps);
      ASSERT_TRUE(plan.has_value()) << plan.error().message;

      using B = llama::BufferMemory;
      EXPECT_EQ(bytes_of(measured, "CPU_Mapped", &B::model_bytes), plan->model_mapped_bytes);
      EXPECT_EQ(bytes_of(measured, "CPU", &B::model_bytes), plan->model_host_bytes);
      EXPECT_EQ(bytes_of(measured, "CPU_REPACK", &B::model_bytes), plan->model_repack_bytes);
      EXPECT_EQ(bytes_of(measured, "CPU", &B::context_bytes), plan->kv.host_bytes);
      // The compute buffer is ggml's allocator replayed over llama.cpp's own graph: equal to
      // the byte, sliding-window masks, quantized-cache rotations and per-stream views included.
      EXPECT_EQ(plan->compute.host_bytes, bytes_of(measured, "CPU", &B::compute_bytes))
          << "stage " << plan->compute_stage;
      EXPECT_EQ(plan->compute_stage, "graph");
      EXPECT_EQ(plan->gpu_total_bytes, 0U);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PlanVsLlama, ::testing::ValuesIn(k_models),
                         [](const auto& param_info) { return std::string(param_info.param.name); });

// The bench process (a child that loads the model, fills one ubatch and decodes) grows by the
// planned host RAM, within 10%.
TEST(PlanVsLlamaProcess, BenchProcessGrowsByThePlannedHostMemory) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "under a sanitizer the process's RSS also holds shadow memory (and for ASan "
                  "redzones and the free quarantine): its growth is not the engine's";
#endif
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  const fs::path dir =
      fs::temp_directory_path() / ("kvprof-plan-rss-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const ModelCase big{
      "rss", "f16",
      R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":512,
          "intermediate_size":1536,"num_attention_heads":8,"num_key_value_heads":4,
          "num_hidden_layers":8,"vocab_size":32000,"max_position_embeddings":8192,
          "tie_word_embeddings":false,"torch_dtype":"bfloat16"})"};
  const fs::path file = write_model(dir, big);
  const auto spec = model::load_model(file.string());
  ASSERT_TRUE(spec.has_value());
  struct Case {
    const char* flags;
    LlamaCppSettings plan;
  };
  // Each prompt fills the context, so the attention over every cell happens once.
  LlamaCppSettings mapped;
  mapped.n_ctx = 1024;
  mapped.n_seq_max = 2;
  LlamaCppSettings read = mapped;
  read.use_mmap = false;
  read.n_ctx = 2048;
  read.flash_attn = false;
  read.n_ubatch = 256;
  for (const Case& c : {Case{"-c 1024 -np 2 -fa on --prompt-toks 1000", mapped},
                        Case{"-c 2048 -np 2 -fa off -ub 256 --no-mmap --prompt-toks 2000", read}}) {
    SCOPED_TRACE(c.flags);
    const fs::path out = dir / "out";
    fs::remove_all(out);
    const auto r = test::run_kvprof("bench -m " + file.string() + " --concurrency 1 --gen-toks 4 " +
                                    c.flags + " --llama-lib " + lib_dir->string() +
                                    " --output-dir " + out.string() + " --json");
    ASSERT_EQ(r.rc, 0) << r.out;
    fs::path summary;
    for (const auto& e : fs::recursive_directory_iterator(out))
      if (e.path().filename() == "summary.json") summary = e.path();
    std::ifstream in(summary);
    const auto j = nlohmann::json::parse(in);
    const double growth = j["memory_breakdown"]["process_growth_bytes"].get<double>();
    const auto plan = plan_llamacpp(*spec, c.plan);
    ASSERT_TRUE(plan.has_value());
    EXPECT_NEAR(static_cast<double>(plan->host_total_bytes), growth, growth * 0.10);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace kvprof::engines
