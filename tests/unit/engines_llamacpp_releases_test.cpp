// The llama.cpp plan of each release against that release's own report, on seven real prebuilt
// builds (npm's @node-llama-cpp/linux-x64 3.1.1 = b3889, 3.6.0 = b4753, 3.10.0 = b5640, 3.13.0 =
// b6431, 3.16.2 = b8121, 3.21.1 = v0.4.0, fetched by scripts/fetch_llama_releases.sh, and the
// installed 3.22.1 = v0.5.0). kvprof's own loader speaks only v0.4.0's C API and later, so each
// release is asked another way: up to 3.16.2 through its own C API with the struct layout of
// that release (tests/llama_c_api/), from 3.21.1 through the Node.js addon its package ships
// (tests/support/llama_addon_report.cjs; older addons cannot set the KV cache's types). A matrix
// of models (dense GQA, MHA, q8_0 weights, Gemma 2's sliding window with the 26 layers early
// releases want of a Gemma 2, Qwen3-MoE) and settings (-c, -np with a cache per slot, -fa on/off,
// -b, -ub apart from -b where the driver can pass it, -ctk/-ctv f16, q8_0, q4_0): model and KV
// buffers equal to the log's 0.01 MiB, the context size equal, the compute buffer within 2%.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kvprof/engines/llamacpp/buffers.hpp"
#include "kvprof/engines/llamacpp/llamacpp.hpp"
#include "kvprof/engines/llamacpp/releases.hpp"
#include "kvprof/model/dummy_gguf.hpp"
#include "kvprof/model/resolve.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "kvprof/util/units.hpp"
#include "support/run_kvprof.hpp"
#include "support/serve_process.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

// How a release is asked for its report.
enum class Driver { c_api, addon };

struct Release {
  const char* package;  // npm version; "" = the installed one
  const char* build;    // what kvprof plans it as
  Driver driver;
};

constexpr uint32_t k_f16 = 1, k_q4_0 = 2, k_q8_0 = 8;  // ggml type ids

struct Setting {
  uint32_t n_ctx;
  uint32_t n_seq_max;
  bool flash_attn;
  uint32_t n_batch;
  uint32_t type_k = k_f16;
  uint32_t type_v = k_f16;  // a quantized V needs flash attention on every release
  uint32_t n_ubatch = 0;    // 0: -ub = -b (the addons take one batch size only)
  bool fa_default = false;  // -fa not given: the release's default, whatever flash_attn says
  [[nodiscard]] uint32_t ubatch() const { return n_ubatch ? n_ubatch : n_batch; }
  // The releases's -fa: given, or its default (off before b6325, auto - on for the CPU - since).
  [[nodiscard]] bool fa(const engines::LlamaCppReleaseRules& r) const {
    return fa_default ? r.flash_attn_auto : flash_attn;
  }
  [[nodiscard]] std::string fa_text() const {
    return fa_default ? "default" : flash_attn ? "on" : "off";
  }
};

constexpr Setting k_settings[] = {
    {4096, 1, false, 512},
    {4096, 4, false, 512},
    {4096, 1, true, 512},
    {32768, 4, true, 512},
    {8192, 2, false, 2048},
    {8192, 2, true, 128},
    {1000, 3, true, 100},
    {1000, 3, false, 100},
    {4096, 1, true, 512, k_q8_0, k_q8_0},
    {8192, 2, false, 2048, k_q8_0, k_f16},
    {32768, 4, true, 512, k_q4_0, k_q4_0},
    {1000, 3, true, 100, k_q8_0, k_q4_0},
    {8192, 2, false, 2048, k_f16, k_f16, 512},
    {4096, 1, true, 1024, k_q8_0, k_q8_0, 256},
    {8192, 2, false, 512, k_f16, k_f16, 0, true},
};

// The settings a driver can pass: the addons set -ub to -b and -fa always.
std::vector<Setting> settings_for(Driver driver) {
  std::vector<Setting> out;
  for (const auto& s : k_settings) {
    if (driver == Driver::c_api || (s.n_ubatch == 0 && !s.fa_default)) out.push_back(s);
  }
  return out;
}

const char* ggml_type_name(uint32_t type) {
  return type == k_q8_0 ? "q8_0" : type == k_q4_0 ? "q4_0" : "f16";
}

// The sum of every "<what> buffer size = X MiB" figure of `log` that `pattern` matches, and how
// many lines it took.
std::pair<double, int> sum_mib(const std::string& log, const std::regex& pattern) {
  double total = 0;
  int lines = 0;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), pattern);
       it != std::sregex_iterator(); ++it) {
    total += std::stod((*it)[1].str());
    ++lines;
  }
  return {total, lines};
}

// The lines of `log` that size a buffer ("... buffer size = ...", "...: size = ..."), trimmed.
std::vector<std::string> buffer_lines(const std::string& log) {
  std::vector<std::string> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find("buffer size =") == std::string::npos &&
        line.find(": size = ") == std::string::npos)
      continue;
    const size_t first = line.find_first_not_of(' ');
    out.push_back(line.substr(first, line.find_last_not_of(" \r") - first + 1));
  }
  return out;
}

// The tiny models of the matrix, as HF configs, and the GGUF each is written as: f16, or q8_0
// weights, or a llama-quantize mix (the repacked types: Q4_0, Q4_K, MXFP4 experts).
constexpr const char* k_gqa_config =
    R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":256,
        "intermediate_size":512,"num_attention_heads":8,"num_key_value_heads":2,
        "num_hidden_layers":4,"vocab_size":32000,"max_position_embeddings":131072,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})";
constexpr const char* k_moe_config =
    R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe","hidden_size":256,
        "intermediate_size":512,"moe_intermediate_size":128,"num_experts":8,
        "num_experts_per_tok":2,"num_attention_heads":8,"num_key_value_heads":2,"head_dim":32,
        "num_hidden_layers":4,"vocab_size":32000,"max_position_embeddings":131072,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})";

struct TinyModel {
  const char* name;
  const char* config;
  uint32_t ggml_type = 1;    // the weight matrices' type without a mix
  const char* mix = "";      // a llama-quantize mix ("Q4_K_M"), or none
  uint32_t first_build = 0;  // the first release that loads it (its architecture, its types)
};

const TinyModel k_models[] = {
    {"gqa", k_gqa_config},
    {"mha",
     R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":256,
        "intermediate_size":512,"num_attention_heads":8,"num_key_value_heads":8,
        "num_hidden_layers":4,"vocab_size":32000,"max_position_embeddings":131072,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})"},
    {"q8_0",
     R"({"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":256,
        "intermediate_size":512,"num_attention_heads":8,"num_key_value_heads":2,
        "num_hidden_layers":4,"vocab_size":32000,"max_position_embeddings":131072,
        "tie_word_embeddings":true,"torch_dtype":"bfloat16"})",
     8},
    {"swa",
     R"({"architectures":["Gemma2ForCausalLM"],"model_type":"gemma2","hidden_size":256,
        "intermediate_size":512,"num_attention_heads":8,"num_key_value_heads":4,"head_dim":32,
        "num_hidden_layers":26,"vocab_size":32000,"max_position_embeddings":131072,
        "sliding_window":512,"query_pre_attn_scalar":32,"attn_logit_softcapping":50.0,
        "final_logit_softcapping":30.0,"torch_dtype":"bfloat16"})"},
    // llama.cpp #12828 added the qwen3moe architecture (b5092).
    {"moe", k_moe_config, 1, "", 5092},
    {"q4_0", k_gqa_config, 2},
    {"q4_k_m", k_gqa_config, 1, "Q4_K_M"},
    // MXFP4 came with gpt-oss (#15091, b6096).
    {"mxfp4", k_moe_config, 1, "MXFP4_MOE", 6096},
};

class ReleasePlan : public ::testing::TestWithParam<Release> {
 protected:
  static void SetUpTestSuite() {
    s_dir = std::make_unique<test::ScopedTempDir>("kvprof_release_plan");
    for (const auto& m : k_models) {
      const fs::path folder = s_dir->path / m.name;
      fs::create_directories(folder);
      std::ofstream(folder / "config.json") << m.config;
      auto spec = model::load_model((folder / "config.json").string());
      ASSERT_TRUE(spec) << spec.error().message;
      const auto mix = model::find_gguf_mix(m.mix);
      const model::DummyGgufOptions options{mix ? mix->default_type : m.ggml_type, 7};
      auto plan = model::plan_dummy_gguf(*spec, options, mix);
      ASSERT_TRUE(plan) << m.name << ": " << plan.error().message;
      ASSERT_TRUE(model::write_dummy_gguf(*plan, options, folder.string() + ".gguf"));
    }
  }
  static void TearDownTestSuite() { s_dir.reset(); }
  static inline std::unique_ptr<test::ScopedTempDir> s_dir;
};

// Each line's head, the words before its figures, its spaces collapsed (a set: the order of the
// lines is not kvprof's to keep).
std::set<std::string> line_heads(const std::vector<std::string>& lines) {
  std::set<std::string> out;
  for (const auto& line : lines) {
    const size_t size = line.find(": size =");
    std::string head = line.substr(0, size != std::string::npos ? size + 7 : line.find(" = "));
    std::string collapsed;
    for (const char c : head) {
      if (c == ' ' && !collapsed.empty() && collapsed.back() == ' ') continue;
      collapsed += c;
    }
    out.insert(collapsed);
  }
  return out;
}

// The release's report of each setting, one JSON object per setting; `error` holds why the
// model did not load (nothing returned then).
std::vector<json> reports(const Release& release, const fs::path& release_dir, const fs::path& gguf,
                          const std::vector<Setting>& asked, std::string& error) {
  json settings = json::array();
  for (const auto& s : asked) {
    settings.push_back({{"n_ctx", s.n_ctx},
                        {"n_seq_max", s.n_seq_max},
                        {"flash_attn", s.fa_default ? json() : json(s.flash_attn)},
                        {"n_batch", s.n_batch},
                        {"n_ubatch", s.ubatch()},
                        {"type_k", s.type_k},
                        {"type_v", s.type_v}});
  }
  sys::CommandOptions o;
  o.timeout = 300s;
  std::vector<std::string> argv;
  if (release.driver == Driver::addon) {
    argv = {"node", KVPROF_SOURCE_DIR "/tests/support/llama_addon_report.cjs"};
  } else {
    argv = {KVPROF_LLAMA_C_API_REPORT};
    o.env.emplace_back("LD_LIBRARY_PATH", release_dir.string());
  }
  argv.push_back(release_dir.string());
  if (release.driver == Driver::c_api) argv.push_back(release.build);
  argv.push_back(gguf.string());
  argv.push_back(settings.dump());
  auto r = sys::run_command(argv, o);
  std::vector<json> out;
  if (!r || r->exit_code != 0) {
    error = r ? r->stderr_text : r.error().message;
    return out;
  }
  std::istringstream lines(r->stdout_text);
  for (std::string line; std::getline(lines, line);)
    out.push_back(json::parse(line));
  return out;
}

TEST_P(ReleasePlan, BuffersAreTheReleasesOwnReport) {
  const Release rel = GetParam();
  fs::path dir;
  if (std::string(rel.package).empty()) {
    KVPROF_REQUIRE_LLAMA_OR_SKIP(installed);
    dir = *installed;
  } else {
    dir = fs::path(KVPROF_SOURCE_DIR) / ".deps/llama/releases" / rel.package;
    if (!fs::exists(dir / ".complete")) {
      if (test::llama_required())
        FAIL() << rel.package << " missing: run scripts/fetch_llama_releases.sh";
      GTEST_SKIP() << rel.package << " not fetched";
    }
  }
  auto release = engines::parse_llamacpp_release(rel.build);
  ASSERT_TRUE(release);
  EXPECT_TRUE(release->warning.empty()) << release->warning;
  double worst_compute = 0;
  const std::vector<Setting> settings = settings_for(rel.driver);
  for (const auto& model : k_models) {
    const char* name = model.name;
    const fs::path gguf = s_dir->path / (std::string(name) + ".gguf");
    auto spec = model::load_model(gguf.string());
    ASSERT_TRUE(spec) << spec.error().message;
    std::string error;
    const auto got = reports(rel, dir, gguf, settings, error);
    if (release->build < model.first_build) {
      // The architecture or the weights' type came to llama.cpp after this release: it refuses
      // the file, as it should.
      EXPECT_TRUE(got.empty()) << name;
      EXPECT_FALSE(error.empty()) << name;
      if (std::string(name) == "moe") {
        EXPECT_NE(error.find("unknown model architecture: 'qwen3moe'"), std::string::npos) << error;
      }
      continue;
    }
    ASSERT_EQ(got.size(), settings.size()) << name << ": " << error;
    for (size_t i = 0; i < got.size(); ++i) {
      const Setting& s = settings[i];
      const json& r = got[i];
      const std::string what =
          fmt::format("{} {} -c {} -np {} -fa {} -b {} -ub {} -ctk {} -ctv {}", rel.build, name,
                      s.n_ctx, s.n_seq_max, s.fa_text(), s.n_batch, s.ubatch(),
                      ggml_type_name(s.type_k), ggml_type_name(s.type_v));
      ASSERT_FALSE(r.contains("error")) << what << ": " << r.dump();
      const std::string model_log = r.at("model_log").get<std::string>();
      const std::string context_log = r.at("context_log").get<std::string>();
      static const std::regex k_model_size(
          R"((?:model buffer size|CPU buffer size) =\s+([\d.]+) MiB)");
      static const std::regex k_kv_size(R"(KV buffer size =\s+([\d.]+) MiB)");
      static const std::regex k_compute_size(R"(compute buffer size =\s+([\d.]+) MiB)");
      const auto [reported_model_mib, model_lines] = sum_mib(model_log, k_model_size);
      const auto [reported_kv_mib, kv_lines] = sum_mib(context_log, k_kv_size);
      const double reported = sum_mib(context_log, k_compute_size).first;
      std::vector<std::string> reported_lines = buffer_lines(model_log);
      for (auto& line : buffer_lines(context_log))
        reported_lines.push_back(std::move(line));
      engines::LlamaCppSettings ps;
      ps.release = release->rules;
      ps.outputs_per_slot = false;  // the addon keeps libllama's default
      ps.n_ctx = s.n_ctx;
      ps.n_seq_max = s.n_seq_max;
      ps.flash_attn = s.fa(*release->rules);
      ps.n_batch = s.n_batch;
      ps.n_ubatch = s.ubatch();
      ps.type_k = s.type_k;
      ps.type_v = s.type_v;
      ps.kv_unified = false;
      ps.n_gpu_layers = 0;
      auto plan = engines::plan_llamacpp(*spec, ps);
      ASSERT_TRUE(plan) << what << ": " << plan.error().message;
      const double model_mib =
          static_cast<double>(plan->model_mapped_bytes + plan->model_host_bytes +
                              plan->model_repack_bytes) /
          k_mib;
      const double kv_mib = static_cast<double>(plan->kv.host_bytes) / k_mib;
      const double compute_mib = static_cast<double>(plan->compute.host_bytes) / k_mib;
      // Each model buffer (mapped, repacked) is printed rounded to 0.01 MiB.
      EXPECT_NEAR(model_mib, reported_model_mib, 0.0051 * model_lines) << what;
      // Each KV buffer (two with a sliding-window cache) is printed rounded to 0.01 MiB.
      EXPECT_NEAR(kv_mib, reported_kv_mib, 0.0051 * kv_lines) << what;
      EXPECT_EQ(plan->kv_cells, r.at("n_ctx").get<uint32_t>()) << what;
      // Every buffer line the release logs is one kvprof says it will log, in its words (the
      // part before the figures: "llama_kv_cache_unified:        CPU KV buffer size").
      if (std::string(name) != "swa") {  // two KV caches, two lines each: kvprof prints the sum
        const auto planned_lines = engines::llamacpp_log_lines(*plan, ps, spec->n_layer);
        EXPECT_EQ(line_heads(planned_lines), line_heads(reported_lines)) << what;
        // The KV cache's size line, where the release prints one, to the character: cells,
        // layers, sequences and its K and V parts with their types.
        const auto size_line = [](const std::vector<std::string>& lines) {
          for (const auto& line : lines) {
            if (line.find(": size = ") != std::string::npos) return line;
          }
          return std::string{};
        };
        EXPECT_EQ(size_line(planned_lines), size_line(reported_lines)) << what;
      }
      const double err = (compute_mib - reported) / reported;
      worst_compute = std::max(worst_compute, std::abs(err));
      EXPECT_LT(std::abs(err), 0.02)
          << what << ": compute planned " << compute_mib << " MiB, reported " << reported << " MiB";
      std::printf(
          "| %s | %s | -c %u -np %u -fa %s -b %u -ub %u -ctk %s -ctv %s | %.2f / %.2f | %.2f / "
          "%.2f "
          "| %.2f / %.2f (%+.1f%%) |\n",
          rel.build, name, s.n_ctx, s.n_seq_max, s.fa_text().c_str(), s.n_batch, s.ubatch(),
          ggml_type_name(s.type_k), ggml_type_name(s.type_v), model_mib, reported_model_mib, kv_mib,
          reported_kv_mib, compute_mib, reported, 100 * err);
    }
  }
  std::printf("%s: worst compute buffer error %.2f%%\n", rel.build, 100 * worst_compute);
}

TEST(LlamaCppRelease, EveryFormLlamaCppPrintsNamesItsBuild) {
  const auto build = [](std::string_view text) {
    auto r = engines::parse_llamacpp_release(text);
    return r ? r->build : 0U;
  };
  EXPECT_EQ(build("b5640"), 5640U);
  EXPECT_EQ(build("5640"), 5640U);
  EXPECT_EQ(build("version: 7166 (eec1e33a9)"), 7166U);   // llama-server --version
  EXPECT_EQ(build("build: 6527 (a1b2c3d)"), 6527U);       // the startup log
  EXPECT_EQ(build("b6527-a1b2c3d"), 6527U);               // /props build_info
  EXPECT_EQ(build("ggml-org/llama.cpp v0.4.0"), 10809U);  // npm's _nlcBuildMetadata.json
  EXPECT_EQ(build("0.5.0-dev"), 11146U);                  // llama_version()
  EXPECT_EQ(build("v0.4.2"), 10809U);
  EXPECT_EQ(build("latest"), 0U);
  EXPECT_EQ(&*engines::parse_llamacpp_release("")->rules, &engines::llamacpp_latest_release());
  for (const char* bad : {"master", "b", "v1.0", "unknown", "build: 0 (unknown)"}) {
    const auto r = engines::parse_llamacpp_release(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().kind, ErrorKind::usage) << bad;
  }
}

TEST(LlamaCppRelease, EachBuildTakesTheRowThatCoversItAndOutsideTheRangeSaysSo) {
  const auto row = [](std::string_view text) {
    return std::string(engines::parse_llamacpp_release(text)->rules->name);
  };
  EXPECT_EQ(row("b3889"), "b3889");
  EXPECT_EQ(row("b5640"), "b5615");
  EXPECT_EQ(row("b5614"), "b5550");
  EXPECT_EQ(row("b8175"), "b8175");
  EXPECT_EQ(row("b6324"), "b6233");
  EXPECT_EQ(row("b6325"), "b6325");
  EXPECT_EQ(row("b8121"), "b7774");
  EXPECT_EQ(row("v0.4.0"), "b9460");
  const auto older = engines::parse_llamacpp_release("b1000");
  EXPECT_EQ(older->rules->name, "b3889");
  EXPECT_NE(older->warning.find("older than kvprof models"), std::string::npos);
  const auto newer = engines::parse_llamacpp_release("v0.9.0");
  EXPECT_EQ(newer->rules, &engines::llamacpp_latest_release());
  EXPECT_NE(newer->warning.find("newer than kvprof models"), std::string::npos);
  EXPECT_TRUE(engines::parse_llamacpp_release("b5640")->warning.empty());
  // Rows are ordered and each starts where its change landed.
  uint32_t last = 0;
  for (const auto& r : engines::llamacpp_releases()) {
    EXPECT_GE(r.first_build, last) << r.name;
    last = r.first_build;
    EXPECT_FALSE(r.change.empty()) << r.name;
  }
}

// The flash-attention default of a release decides the compute buffer, and the plan says why.
TEST(LlamaCppRelease, EstimateOfAnOldAndANewReleaseShowsTheFlashAttentionDefault) {
  test::ScopedTempDir tmp("kvprof_release_estimate");
  ASSERT_TRUE(test::write_dummy_llama(tmp.path / "tiny.gguf", 32000));
  const auto estimate = [&](const std::string& release) {
    return test::run_kvprof("estimate --engine llamacpp --gpu cpu -c 16384 -m " +
                            (tmp.path / "tiny.gguf").string() + " --engine-version " + release +
                            " --json");
  };
  const auto old_run = estimate("b5640");
  const auto new_run = estimate("b6325");
  ASSERT_EQ(old_run.rc, 0) << old_run.out;
  ASSERT_EQ(new_run.rc, 0) << new_run.out;
  const json old_plan = test::json_in(old_run.out);
  const json new_plan = test::json_in(new_run.out);
  const auto compute = [](const json& j) {
    return j.at("llamacpp").at("host").at("compute_reserved_bytes").get<uint64_t>();
  };
  // Without flash attention the scores of every head over 16384 cells (beside the logits of 512
  // tokens, which both reserve): 161 MiB against 63 MiB here.
  EXPECT_GT(compute(old_plan), 2 * compute(new_plan));
  EXPECT_EQ(old_plan.at("assumptions").at("settings").at("flash_attn").at("value"), "off");
  EXPECT_EQ(new_plan.at("assumptions").at("settings").at("flash_attn").at("value"), "on");
  const std::string warnings = old_plan.at("warnings").dump();
  EXPECT_NE(warnings.find("flash attention off: llama.cpp b5640's default"), std::string::npos)
      << warnings;
  EXPECT_EQ(new_plan.at("warnings").dump().find("flash attention off"), std::string::npos);
  EXPECT_EQ(old_plan.at("assumptions").at("engine_version_modelled"), "b5640");
  // -fa on given: the release's default does not matter.
  const auto given =
      test::run_kvprof("estimate --engine llamacpp --gpu cpu -c 16384 -m " +
                       (tmp.path / "tiny.gguf").string() + " --engine-version b5640 -fa on --json");
  ASSERT_EQ(given.rc, 0) << given.out;
  EXPECT_EQ(compute(test::json_in(given.out)), compute(new_plan));
}

INSTANTIATE_TEST_SUITE_P(Npm, ReleasePlan,
                         ::testing::Values(Release{"3.1.1", "b3889", Driver::c_api},
                                           Release{"3.6.0", "b4753", Driver::c_api},
                                           Release{"3.10.0", "b5640", Driver::c_api},
                                           Release{"3.13.0", "b6431", Driver::c_api},
                                           Release{"3.16.2", "b8121", Driver::c_api},
                                           Release{"3.21.1", "v0.4.0", Driver::addon},
                                           Release{"", "v0.5.0", Driver::addon}),
                         [](const ::testing::TestParamInfo<Release>& p) {
                           std::string name = p.param.build;
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

}  // namespace
}  // namespace kvprof
