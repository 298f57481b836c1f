// `kvprof bench --estimate-with FLAGS` end to end on the real libllama and a GGUF made by
// `kvprof make-gguf`: the plan for other llama.cpp settings is recorded in summary.json in
// profile's `estimate_comparison` layout (flags, assumptions, rows, likely causes naming the
// settings that differ from the run's), a run without it records the plan of its own settings
// (equal to the per-condition plan), `kvprof compare` and the docs read both, and bad flags stop
// before anything runs (did-you-mean, exit 2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "support/run_kvprof.hpp"
#include "support/tiny_llama.hpp"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// The model make-gguf writes: 2 layers, 2 KV heads of 32 dims.
constexpr uint64_t k_n_layer = 2;
constexpr uint64_t k_kv_dims = 2 * 32;                                    // n_head_kv x head_dim
constexpr uint64_t k_f16_bytes_per_cell = k_n_layer * 2 * k_kv_dims * 2;  // K + V, f16
// K in q8_0 (blocks of 32 values in 34 bytes), V in f16.
constexpr uint64_t k_q8k_bytes_per_cell = k_n_layer * (k_kv_dims / 32 * 34 + k_kv_dims * 2);

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class BenchEstimateWith : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = fs::temp_directory_path() / ("kvprof_bench_estwith_" + std::to_string(::getpid()));
    fs::remove_all(s_dir);
    fs::create_directories(s_dir);
    std::ofstream(s_dir / "config.json")
        << R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":8192,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})";
    s_made = kvprof::test::run_kvprof("make-gguf -m " + (s_dir / "config.json").string() + " -o " +
                                      gguf().string());
  }
  static void TearDownTestSuite() { fs::remove_all(s_dir); }

  static fs::path gguf() { return s_dir / "tiny.gguf"; }

  // `kvprof bench` on the tiny model (c1 and c2, 64-token prompts) with `extra` flags, into a
  // fresh output folder `name`; the run's summary.json (null when there is no run folder).
  static json bench(const fs::path& lib, const std::string& name, const std::string& extra,
                    kvprof::test::Run& r) {
    const fs::path out = s_dir / name;
    r = kvprof::test::run_kvprof("bench -m " + gguf().string() +
                                 " --concurrency 1,2 --prompt-toks 64 --gen-toks 8 -t 2 "
                                 "--no-report --llama-lib " +
                                 lib.string() + " --output-dir " + out.string() + " " + extra);
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out, ec)) {
      if (e.is_directory())
        return json::parse(read_text(e.path() / "summary.json"), nullptr, false);
    }
    return nullptr;
  }

  static const json& row(const json& cmp, const std::string& component) {
    for (const auto& r : cmp.at("rows"))
      if (r.at("component") == component) return r;
    static const json none;
    ADD_FAILURE() << "no row " << component << " in " << cmp.dump(1);
    return none;
  }

  static inline fs::path s_dir;
  static inline kvprof::test::Run s_made;
};

TEST_F(BenchEstimateWith, PlanForOtherFlagsIsComparedAndTheDifferingSettingsNamed) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_EQ(s_made.rc, 0) << s_made.out;
  kvprof::test::Run r;
  const json s = bench(*lib_dir, "with", "--estimate-with \"-c 8192 -np 4 -ctk q8_0\"", r);
  ASSERT_EQ(r.rc, 0) << r.out;
  ASSERT_TRUE(s.is_object());
  const json& cmp = s.at("estimate_comparison");
  EXPECT_EQ(cmp.at("estimate_flags"), "-c 8192 -np 4 -ctk q8_0");
  EXPECT_EQ(cmp.at("nature"), "measured");
  // What the plan assumed: the flags given, the rest llama-server's defaults, on the bench's GGUF.
  const json& a = cmp.at("assumptions");
  EXPECT_EQ(a.at("engine"), "llamacpp");
  EXPECT_EQ(a.at("model"), gguf().string());
  const json& set = a.at("settings");
  EXPECT_EQ(set.at("ctx_size"), (json{{"value", 8192}, {"origin", "given"}}));
  EXPECT_EQ(set.at("parallel"), (json{{"value", 4}, {"origin", "given"}}));
  EXPECT_EQ(set.at("cache_type_k"), (json{{"value", "q8_0"}, {"origin", "given"}}));
  EXPECT_EQ(set.at("cache_type_v").at("value"), "f16");
  EXPECT_EQ(set.at("cache_type_v").at("origin"), "default");
  EXPECT_EQ(set.at("ubatch_size").at("origin"), "default");

  // The largest condition (c2 p64) ran in a context of 256 cells of f16 K and V: the engine's
  // KV buffer against the plan's 8192 cells with a q8_0 K.
  const json& kv = row(cmp, "kv_cache");
  EXPECT_EQ(kv.at("measured"), 256 * k_f16_bytes_per_cell);
  EXPECT_EQ(kv.at("estimated"), 8192 * k_q8k_bytes_per_cell);
  EXPECT_NEAR(kv.at("error_pct").get<double>(),
              (8192.0 * k_q8k_bytes_per_cell / (256.0 * k_f16_bytes_per_cell) - 1) * 100, 1e-6);
  EXPECT_EQ(row(cmp, "kv_cache_tokens").at("measured"), 256);
  EXPECT_EQ(row(cmp, "kv_cache_tokens").at("estimated"), 8192);
  // Weights do not depend on those flags: exact from the GGUF.
  const json& w = row(cmp, "weights");
  EXPECT_EQ(w.at("measured"), w.at("estimated"));
  EXPECT_EQ(w.at("measured"), s.at("memory_breakdown").at("components").at("weights").at("bytes"));
  EXPECT_EQ(row(cmp, "activations").at("measured"),
            s.at("memory_breakdown").at("components").at("activations").at("bytes"));

  // The KV line names the three settings that differ from the run's; weights have none.
  std::string kv_line;
  for (const auto& line : cmp.at("likely_causes")) {
    const std::string l = line.get<std::string>();
    EXPECT_FALSE(l.starts_with("weights:")) << l;
    if (l.starts_with("kv_cache:")) kv_line = l;
  }
  EXPECT_NE(kv_line.find("ctx_size 8192 (the run: 256)"), std::string::npos) << kv_line;
  EXPECT_NE(kv_line.find("parallel 4 (the run: 2)"), std::string::npos) << kv_line;
  EXPECT_NE(kv_line.find("cache_type_k q8_0 (the run: f16)"), std::string::npos) << kv_line;
  EXPECT_EQ(kv_line.find("cache_type_v"), std::string::npos) << kv_line;
  // The table says it too.
  EXPECT_NE(r.out.find("estimate check (-c 8192 -np 4 -ctk q8_0)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("estimate check: kv_cache:"), std::string::npos) << r.out;

  // `kvprof compare` reads the plan of a bench run as it reads a profile's.
  const auto run_dir = s.at("run_dir").get<std::string>();
  const auto cmp_run = kvprof::test::run_kvprof("compare " + run_dir + " " + run_dir + " --json");
  ASSERT_EQ(cmp_run.rc, 0) << cmp_run.out;
  EXPECT_NE(cmp_run.out.find("-c 8192 -np 4 -ctk q8_0"), std::string::npos) << cmp_run.out;
}

TEST_F(BenchEstimateWith, WithoutFlagsThePlanOfTheRunsOwnSettingsIsRecordedTheSameWay) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_EQ(s_made.rc, 0) << s_made.out;
  kvprof::test::Run r;
  const json s = bench(*lib_dir, "own", "", r);
  ASSERT_EQ(r.rc, 0) << r.out;
  ASSERT_TRUE(s.is_object());
  const json& cmp = s.at("estimate_comparison");
  const std::string flags = cmp.at("estimate_flags");
  EXPECT_TRUE(flags.starts_with("-c 256 -np 2 ")) << flags;
  EXPECT_NE(flags.find("(the run's own settings)"), std::string::npos) << flags;
  // The same plan as the one beside the largest condition.
  const json& plan = s.at("memory_breakdown").at("estimate");
  EXPECT_EQ(row(cmp, "weights").at("estimated"), plan.at("weights_bytes"));
  EXPECT_EQ(row(cmp, "kv_cache").at("estimated"), plan.at("kv_cache_bytes"));
  EXPECT_EQ(row(cmp, "activations").at("estimated"), plan.at("compute_bytes"));
  EXPECT_EQ(row(cmp, "total").at("estimated"), plan.at("host_total_bytes"));
  // The KV cache is exact, so nothing about it is a likely cause; no line blames the settings.
  EXPECT_EQ(row(cmp, "kv_cache").at("error_pct"), 0.0);
  for (const auto& line : cmp.at("likely_causes")) {
    EXPECT_EQ(line.get<std::string>().find("differ from the run's"), std::string::npos) << line;
  }
  EXPECT_EQ(cmp.at("assumptions").at("settings").at("ctx_size").at("value"), 256);
}

TEST_F(BenchEstimateWith, NoKvUnifiedSplitsTheCellsPerSequenceAndThePlanFollows) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_EQ(s_made.rc, 0) << s_made.out;
  kvprof::test::Run r;
  const json s = bench(*lib_dir, "split", "-c 512 --parallel 2 --no-kv-unified", r);
  ASSERT_EQ(r.rc, 0) << r.out;
  ASSERT_TRUE(s.is_object());
  const json& cmp = s.at("estimate_comparison");
  const std::string flags = cmp.at("estimate_flags");
  EXPECT_NE(flags.find("-c 512 -np 2 "), std::string::npos) << flags;
  EXPECT_NE(flags.find("--no-kv-unified"), std::string::npos) << flags;
  // Two streams of 256 cells: the KV buffer libllama reports is the plan's to the byte.
  EXPECT_EQ(row(cmp, "kv_cache").at("error_pct"), 0.0) << cmp.dump(1);
  EXPECT_EQ(cmp.at("assumptions").at("settings").at("kv_unified").at("value"), false)
      << cmp.at("assumptions").dump(1);
  // And against the same run with one shared stream, the same total: llama.cpp allocates
  // -c cells either way, only their split differs.
  kvprof::test::Run shared_run;
  const json shared = bench(*lib_dir, "shared", "-c 512 --parallel 2", shared_run);
  ASSERT_EQ(shared_run.rc, 0) << shared_run.out;
  EXPECT_EQ(row(shared.at("estimate_comparison"), "kv_cache").at("measured"),
            row(cmp, "kv_cache").at("measured"));
}

TEST_F(BenchEstimateWith, UnknownFlagIsAUsageErrorWithTheClosestNameAndNothingRuns) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_EQ(s_made.rc, 0) << s_made.out;
  kvprof::test::Run r;
  const json s = bench(*lib_dir, "typo", "--estimate-with \"-c 8192 --cache-typ-k q8_0\"", r);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--estimate-with"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--cache-type-k"), std::string::npos) << r.out;
  EXPECT_TRUE(s.is_null()) << "a run folder was made";
  // Another engine's plan cannot be compared with llama.cpp's buffers.
  EXPECT_EQ(bench(*lib_dir, "vllm", "--estimate-with \"--engine vllm\"", r), nullptr);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--engine llamacpp"), std::string::npos) << r.out;
}

// The bench table of docs/summary-schema.md lists every top-level field bench writes and no
// other, and the comparison's fields are the ones profile's table documents.
TEST_F(BenchEstimateWith, SummaryFieldsAreTheDocumentedOnes) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_EQ(s_made.rc, 0) << s_made.out;
  kvprof::test::Run r;
  const json s = bench(*lib_dir, "doc", "--estimate-with \"-c 1024\"", r);
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string doc = read_text(fs::path(KVPROF_SOURCE_DIR) / "docs" / "summary-schema.md");
  const std::regex row_re(R"(^\|\s*`([^`]+)`\s*\|)");
  std::set<std::string> bench_fields, profile_fields;
  std::istringstream in(doc);
  std::set<std::string>* table = nullptr;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("|")) {
      table = nullptr;
      continue;
    }
    if (line.starts_with("| bench field |")) table = &bench_fields;
    if (line.starts_with("| profile field |")) table = &profile_fields;
    std::smatch m;
    if (table != nullptr && std::regex_search(line, m, row_re)) table->insert(m[1]);
  }
  std::set<std::string> written;
  for (const auto& [key, v] : s.items())
    written.insert(key);
  EXPECT_EQ(written, bench_fields);
  // Every path of the comparison (map keys of settings as `*`) is one of profile's.
  std::function<void(const json&, const std::string&)> walk = [&](const json& j,
                                                                  const std::string& path) {
    EXPECT_TRUE(profile_fields.contains(path)) << "not documented for profile: " << path;
    if (j.is_array()) {
      for (const auto& e : j)
        walk(e, path + "[]");
    } else if (j.is_object()) {
      for (const auto& [k, v] : j.items())
        walk(v, path + "." + (path.ends_with(".settings") ? std::string("*") : k));
    }
  };
  walk(s.at("estimate_comparison"), "estimate_comparison");
}

}  // namespace
