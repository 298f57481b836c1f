// llama.cpp's tensor overrides (-ot, --cpu-moe, --n-cpu-moe; engines/llamacpp/tensor_overrides):
// read as llama.cpp's argument parser reads them, and placing, by name and first match, exactly
// the tensors of a real GGUF that llama.cpp would place — the rest left to -ngl.
#include "kvprof/engines/llamacpp/tensor_overrides.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "kvprof/engines/llamacpp/buffers.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/dummy_gguf.hpp"
#include "kvprof/model/resolve.hpp"
#include "support/run_kvprof.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

namespace kvprof::engines {
namespace {

namespace fs = std::filesystem;

TEST(TensorOverrides, ReadAsLlamaCppReadsThem) {
  const auto o = parse_override_tensor("blk\\.(1[0-9])\\.ffn_.*_exps=CPU,token_embd=CUDA1");
  ASSERT_TRUE(o) << o.error().message;
  ASSERT_EQ(o->size(), 2U);
  EXPECT_EQ((*o)[0].pattern, "blk\\.(1[0-9])\\.ffn_.*_exps");
  EXPECT_EQ((*o)[0].buffer_type, "CPU");
  EXPECT_EQ((*o)[1].buffer_type, "CUDA1");
  // Split at the first '=': a pattern cannot hold one, a buffer type name can be checked.
  for (const char* bad : {"exps", "=CPU", "exps=GPU", "exps=CUDA", "x(=CPU", "a=CPU,b"}) {
    const auto r = parse_override_tensor(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().kind, ErrorKind::usage);
  }
  EXPECT_FALSE(parse_override_tensor(std::string(70000, 'a') + "=CPU"));
  const auto n = n_cpu_moe_overrides(3);
  ASSERT_TRUE(n);
  ASSERT_EQ(n->size(), 3U);
  EXPECT_EQ((*n)[2].pattern, "blk\\.2\\.ffn_(up|down|gate)_exps");
  EXPECT_FALSE(n_cpu_moe_overrides(5000));
}

TEST(TensorOverrides, TheFirstMatchDecidesByRegexSearch) {
  const TensorPlacement p({{"blk\\.1\\.", "CUDA0"}, {"_exps", "CPU"}});
  EXPECT_EQ(p.device_of("blk.1.ffn_up_exps.weight"), 0);  // the first match, not the second
  EXPECT_EQ(p.device_of("blk.2.ffn_up_exps.weight"), -1);
  EXPECT_EQ(p.device_of("blk.10.attn_q.weight"), std::nullopt);  // "blk\.1\." is not in it
  const TensorPlacement moe({cpu_moe_override()});
  EXPECT_EQ(moe.device_of("blk.7.ffn_gate_exps.weight"), -1);
  EXPECT_EQ(moe.device_of("blk.7.ffn_gate_inp.weight"), std::nullopt);  // the router stays
  EXPECT_EQ(moe.device_of("blk.7.ffn_gate_shexp.weight"), std::nullopt);
}

// The text a pattern's every match contains, which lets a tensor name without it pass unread:
// never more than the regular expression requires, so the placement is the regex's own.
TEST(TensorOverrides, ANameWithoutAPatternsLiteralIsPassedOver) {
  EXPECT_EQ(regex_required_literal("blk\\.17\\.ffn_(up|down|gate)_(ch|)exps"), "blk.17.ffn_");
  EXPECT_EQ(regex_required_literal("^token_embd\\.weight$"), "token_embd.weight");
  EXPECT_EQ(regex_required_literal("exps=CPU"), "exps=CPU");
  EXPECT_EQ(regex_required_literal("blk\\.1?0\\."), "blk.");  // the 1 is optional
  EXPECT_EQ(regex_required_literal("blk\\.(1|2)\\."), "blk.");
  EXPECT_EQ(regex_required_literal("ffn_up|ffn_down"), "");  // either one
  EXPECT_EQ(regex_required_literal("[a|b]x"), "");           // a class first
  EXPECT_EQ(regex_required_literal("\\d+\\.ffn"), "");
  EXPECT_EQ(regex_required_literal("blk\\.\\d+\\.ffn_"), "blk.");
  EXPECT_EQ(regex_required_literal("a{2}"), "");
  EXPECT_EQ(regex_required_literal("(unclosed"), "");
  // The same placement with the literal as without: every tensor of a MoE layer against every
  // pattern the fit writes.
  std::vector<estimate::TensorOverride> fit_patterns;
  for (int il = 0; il < 12; ++il) {
    fit_patterns.push_back({"blk\\." + std::to_string(il) + "\\.ffn_(gate|up|gate_up|down).*",
                            il % 2 == 0 ? "CPU" : "CUDA1"});
    fit_patterns.push_back(
        {"blk\\." + std::to_string(il) + "\\.ffn_(up|down|gate_up|gate)_(ch|)exps", "CPU"});
  }
  const TensorPlacement placement(fit_patterns);
  for (int il = 0; il < 14; ++il) {
    for (const char* t : {"attn_q.weight", "ffn_up_exps.weight", "ffn_gate_inp.weight",
                          "ffn_down_shexp.weight", "ffn_gate_up_exps.weight"}) {
      const std::string name = "blk." + std::to_string(il) + "." + t;
      std::optional<int32_t> expected;
      for (const auto& o : fit_patterns) {
        if (std::regex_search(name, std::regex(o.pattern))) {
          expected = o.buffer_type == "CPU" ? -1 : 1;
          break;
        }
      }
      EXPECT_EQ(placement.device_of(name), expected) << name;
    }
  }
}

TEST(TensorOverrides, ServerCommandsKeepTheirOrder) {
  const auto r = read_launch_command(
      "llama-server -m m.gguf -ngl 99 -ot 'blk\\.0\\.=CUDA0' --n-cpu-moe 2 --cpu-moe");
  ASSERT_TRUE(r.has_value());
  const auto& o = r->settings.tensor_overrides;
  ASSERT_EQ(o.size(), 4U);
  EXPECT_EQ(o[0].pattern, "blk\\.0\\.");
  EXPECT_EQ(o[1].pattern, "blk\\.0\\.ffn_(up|down|gate)_exps");
  EXPECT_EQ(o[3].pattern, k_expert_tensors_regex);
  EXPECT_TRUE(r->given.contains("override-tensor"));
  const auto bad = read_launch_command("llama-server -m m.gguf -ot nonsense");
  ASSERT_TRUE(bad.has_value());
  EXPECT_TRUE(bad->settings.tensor_overrides.empty());
  EXPECT_TRUE(std::ranges::any_of(bad->notes, [](const std::string& n) {
    return n.find("not PATTERN=BUFFER_TYPE") != std::string::npos;
  })) << testing::PrintToString(bad->notes);
}

class TensorOverridesOnAGguf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = fs::temp_directory_path() / ("kvprof_ot_" + std::to_string(::getpid()));
    fs::create_directories(s_dir);
    std::ofstream(s_dir / "config.json")
        << R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe","hidden_size":256,
        "intermediate_size":512,"moe_intermediate_size":128,"num_experts":8,
        "num_experts_per_tok":2,"decoder_sparse_step":1,"mlp_only_layers":[],
        "num_attention_heads":8,"num_key_value_heads":2,"head_dim":32,"num_hidden_layers":3,
        "vocab_size":4096,"max_position_embeddings":8192,"tie_word_embeddings":false,
        "torch_dtype":"bfloat16"})";
    const auto spec = model::load_model((s_dir / "config.json").string());
    ASSERT_TRUE(spec) << spec.error().message;
    const model::DummyGgufOptions options{1 /* F16 */, 3};
    const auto plan = model::plan_dummy_gguf(*spec, options);
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(model::write_dummy_gguf(*plan, options, s_dir / "moe.gguf"));
  }
  static void TearDownTestSuite() { fs::remove_all(s_dir); }

  static LlamaCppSettings on_gpu() {
    LlamaCppSettings s;
    s.has_gpu = true;
    s.n_gpu_layers = -1;
    s.n_ctx = 512;
    return s;
  }
  // Bytes of the GGUF's tensors whose name matches `pattern`.
  static uint64_t bytes_matching(const model::ModelSpec& m, const std::string& pattern) {
    uint64_t sum = 0;
    for (const auto& t : m.tensors)
      if (std::regex_search(t.name, std::regex(pattern))) sum += t.bytes;
    return sum;
  }
  static inline fs::path s_dir;
};

TEST_F(TensorOverridesOnAGguf, NCpuMoeMovesExactlyThoseLayersExpertsToTheHost) {
  const auto m = model::load_model((s_dir / "moe.gguf").string());
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_FALSE(m->tensors.empty());
  const auto all = plan_llamacpp(*m, on_gpu());
  ASSERT_TRUE(all) << all.error().message;
  auto s = on_gpu();
  s.tensor_overrides = *n_cpu_moe_overrides(2);
  const auto two = plan_llamacpp(*m, s);
  ASSERT_TRUE(two) << two.error().message;
  const uint64_t experts = bytes_matching(*m, "blk\\.[01]\\.ffn_(up|down|gate)_exps");
  ASSERT_GT(experts, 0U);
  EXPECT_EQ(two->overridden_host_bytes, experts);
  EXPECT_EQ(all->model_gpu_bytes - two->model_gpu_bytes, experts);
  EXPECT_EQ(two->model_host_resident_bytes - all->model_host_resident_bytes, experts);
  // --cpu-moe: every layer's experts; -ot to a GPU the plan does not have: the host.
  s.tensor_overrides = {cpu_moe_override()};
  const auto every = plan_llamacpp(*m, s);
  ASSERT_TRUE(every);
  EXPECT_EQ(every->overridden_host_bytes, bytes_matching(*m, k_expert_tensors_regex));
  // An override to the GPU keeps a tensor there even when -ngl leaves its layer on the host.
  auto host = on_gpu();
  host.n_gpu_layers = 0;
  const auto none = plan_llamacpp(*m, host);
  host.tensor_overrides = {{"blk\\.2\\.attn_q\\.weight", "CUDA0"}};
  const auto one = plan_llamacpp(*m, host);
  ASSERT_TRUE(none && one);
  EXPECT_EQ(one->model_gpu_bytes - none->model_gpu_bytes,
            bytes_matching(*m, "blk\\.2\\.attn_q\\.weight"));
}

TEST(TensorOverrides, AModelKnownByItsConfigNamesItsExpertsAsTheGgufWould) {
  // Qwen3-30B-A3B from the catalog (no tensor list): --n-cpu-moe 48 takes every layer's gate, up
  // and down experts off the GPU, as --cpu-moe does.
  const auto m = model::load_model("Qwen/Qwen3-30B-A3B");
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_TRUE(m->tensors.empty());
  LlamaCppSettings s;
  s.has_gpu = true;
  s.tensor_overrides = *n_cpu_moe_overrides(48);
  const auto by_layers = plan_llamacpp(*m, s);
  s.tensor_overrides = {cpu_moe_override()};
  const auto all = plan_llamacpp(*m, s);
  ASSERT_TRUE(by_layers && all);
  EXPECT_EQ(by_layers->overridden_host_bytes, all->overridden_host_bytes);
  // 48 layers x 128 experts x 3 matrices of 768 x 2048, in f16.
  EXPECT_EQ(all->overridden_host_bytes, 48ULL * 128 * 3 * 768 * 2048 * 2);
}

// "How many layers' experts must leave the GPU?": the fewest --n-cpu-moe with which the plan fits,
// and one fewer does not.
TEST(TensorOverrides, TheFewestExpertLayersOnTheHostThatFit) {
  estimate::EstimateInput in;
  in.model = model::load_model("Qwen/Qwen3-30B-A3B").value();
  in.gpu = gpu::find_gpu("RTX-4090").value();
  in.settings.engine = Engine::llamacpp;
  in.settings.n_gpu_layers = 99;
  in.settings.host_memory_bytes = 256ULL << 30;
  const auto est = plan(in);
  ASSERT_TRUE(est) << est.error().message;
  ASSERT_TRUE(est->llamacpp && est->llamacpp->min_n_cpu_moe);
  const uint32_t n = *est->llamacpp->min_n_cpu_moe;
  EXPECT_GT(n, 0U);  // 56 GiB of weights on a 24 GiB card
  EXPECT_LT(n, 48U);
  const auto fits = [&](uint32_t layers) {
    auto with = in;
    with.settings.tensor_overrides = *n_cpu_moe_overrides(layers);
    const auto e = plan(with);
    return e && e->verdict != estimate::Verdict::does_not_start;
  };
  EXPECT_TRUE(fits(n));
  EXPECT_FALSE(fits(n - 1));
}

// On the real libllama (its CPU build), the tensors -ot and --n-cpu-moe place are the ones kvprof
// places: llama.cpp's own debug line for each ("tensor blk.0.ffn_up_exps.weight (0 MiB f16)
// buffer type overridden to CPU", in the bench's engine.log) is the plan's, in the same order,
// and the buffers stay the plan's. A buffer type the library lacks is one line, exit 2.
TEST(TensorOverrides, TheRealLibllamaPlacesTheTensorsThePlanPlaces) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  test::ScopedTempDir tmp("kvprof_ot_real");
  std::ofstream(tmp.path / "config.json")
      << R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe","hidden_size":256,
        "intermediate_size":512,"moe_intermediate_size":128,"num_experts":8,
        "num_experts_per_tok":2,"num_attention_heads":8,"num_key_value_heads":2,"head_dim":32,
        "num_hidden_layers":4,"vocab_size":32000,"max_position_embeddings":4096,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})";
  const fs::path gguf = tmp.path / "moe.gguf";
  const auto made = test::run_kvprof("make-gguf -m " + (tmp.path / "config.json").string() +
                                     " -o " + gguf.string());
  ASSERT_EQ(made.rc, 0) << made.out;
  const std::string flags = "-ot 'blk\\.(2|3)\\.ffn_(up|gate)_exps=CPU' --n-cpu-moe 1";
  const auto bench = test::run_kvprof(
      "bench -m " + gguf.string() + " --llama-lib " + lib_dir->string() + " " + flags +
      " --concurrency 1 --prompt-toks 16 --gen-toks 2 -c 1024 -t 1 -q --no-report --json "
      "--output-dir " +
      (tmp.path / "results").string());
  ASSERT_EQ(bench.rc, 0) << bench.out;
  std::vector<std::string> logged;
  for (const auto& run : fs::directory_iterator(tmp.path / "results")) {
    std::ifstream log(run.path() / "engine.log");
    for (std::string line; std::getline(log, line);)
      if (line.find("buffer type overridden") != std::string::npos) logged.push_back(line);
  }
  const auto plan = test::run_kvprof("estimate --engine llamacpp --gpu cpu -c 1024 -m " +
                                     gguf.string() + " " + flags + " --json");
  ASSERT_EQ(plan.rc, 0) << plan.out;
  const auto planned = test::json_in(plan.out)
                           .at("llamacpp")
                           .at("override_log_lines")
                           .get<std::vector<std::string>>();
  // Layers 2 and 3 by the regex (up and gate), then layer 0's three experts by --n-cpu-moe.
  EXPECT_EQ(planned.size(), 7U);
  EXPECT_EQ(logged, planned);
  // The bench's plan of its own settings (the overrides included) is llama.cpp's report.
  const auto summary = test::json_in(bench.out);
  EXPECT_EQ(summary.at("settings").at("tensor_overrides"),
            nlohmann::json(
                {"blk\\.(2|3)\\.ffn_(up|gate)_exps=CPU", "blk\\.0\\.ffn_(up|down|gate)_exps=CPU"}));
  uint64_t model_bytes = 0;
  for (const auto& b : summary.at("engine_reported"))
    model_bytes += b.at("model_bytes").get<uint64_t>();
  ASSERT_FALSE(summary.at("conditions").empty());
  for (const auto& c : summary.at("conditions")) {
    const auto& est = c.at("estimate");
    EXPECT_EQ(est.at("weights_bytes").get<uint64_t>(), model_bytes) << c.dump();
    EXPECT_EQ(est.at("compute_bytes").get<uint64_t>(),
              c.at("compute_buffer_bytes").get<uint64_t>());
  }
  // A buffer type this CPU build does not have.
  const auto cuda =
      test::run_kvprof("bench -m " + gguf.string() + " --llama-lib " + lib_dir->string() +
                       " -ot 'ffn_up_exps=CUDA0' --concurrency 1 --prompt-toks 16 "
                       "--gen-toks 2 -c 1024 -q --no-report --output-dir " +
                       (tmp.path / "r2").string());
  EXPECT_NE(cuda.rc, 0) << cuda.out;
  EXPECT_NE(cuda.out.find("has no buffer type 'CUDA0' (its devices: CPU)"), std::string::npos)
      << cuda.out;
}

}  // namespace
}  // namespace kvprof::engines
