// compare: two (three) `profile --launch` runs of serve-sim that differ only in CUDA-graph
// settings — --enforce-eager, the default capture sizes, --max-num-seqs 64 — compared end to
// end: the settings that differ are exactly the launch flag, the extra graphs are what each
// engine's log counted, the memory overhead is exactly the graph memory the simulated engine was
// given, and the estimate's prediction sits beside it. Also the run folder reader (profile and
// bench summaries, broken ones), the command-line flags of a launch, and `estimate --compare`.
#include "kvprof/experiment/compare.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kvprof/estimate/activations.hpp"
#include "support/run_kvprof.hpp"

namespace kvprof::experiment {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json parse_output(const std::string& out) {
  json j = test::json_in(out);
  return j.is_discarded() ? json() : j;
}

TEST(CompareRuns, CommandFlagsAreSettings) {
  const auto f = results::command_flags(
      "/usr/bin/kvprof serve-sim --model m --port 8001 --host 127.0.0.1 --enforce-eager "
      "--max-num-seqs=64 --name 'two words' -x -5 pos");
  EXPECT_EQ(f.at("program"), "kvprof serve-sim");
  EXPECT_EQ(f.at("--model"), "m");
  EXPECT_EQ(f.at("--enforce-eager"), "true");
  EXPECT_EQ(f.at("--max-num-seqs"), "64");
  EXPECT_EQ(f.at("--name"), "two words");
  EXPECT_EQ(f.at("-x"), "-5");
  EXPECT_EQ(f.at("arg1"), "pos");
  EXPECT_FALSE(f.contains("--port"));
  EXPECT_FALSE(f.contains("--host"));
  EXPECT_TRUE(results::command_flags("").empty());
}

TEST(CompareRuns, LongLaunchCommandsKeepEveryFlagWhole) {
  // A model path of 600 characters, then the flags that differ between runs.
  const std::string model_path = "/mnt/models/" + std::string(600, 'm');
  const std::string command =
      "/opt/engines/bin/vllm serve " + model_path + " --enforce-eager --max-num-seqs 64";
  const json summary = {{"schema_version", 2},
                        {"run_id", "r1"},
                        {"memory_measurements", json::array()},
                        {"launch", {{"command", command}}}};
  auto r = results::parse_run_summary(summary.dump(), "", "/x/r1");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->launch_command, command);
  EXPECT_EQ(r->settings.at("launch --enforce-eager"), "true");
  EXPECT_EQ(r->settings.at("launch --max-num-seqs"), "64");

  // Past the command bound the cut falls between words: the last flag is whole or gone.
  std::string huge = "vllm serve m";
  while (huge.size() < 8300)
    huge += " --flag-number-" + std::to_string(huge.size());
  const auto f = results::command_flags(huge);
  for (const auto& [name, value] : f) {
    if (!name.starts_with("--")) continue;  // the program and its positional argument
    EXPECT_NE(huge.find(" " + name + " "), std::string::npos) << name;
  }
  EXPECT_GT(f.size(), 100U);
}

TEST(CompareRuns, ReadsBenchSummariesAndRejectsOthers) {
  const json bench = {
      {"schema_version", 1},
      {"kind", "bench"},
      {"run_id", "b1"},
      {"settings", {{"model", "/m/tiny.gguf"}, {"parallel", 4}}},
      {"host_memory",
       {{"phases", {{"before_load", {{"rss_bytes", 100}}}}}, {"peak_rss_bytes", 900}}},
      {"engine_reported",
       json::array({{{"model_bytes", 10}, {"context_bytes", 20}, {"compute_bytes", 30}}})},
      {"memory_breakdown",
       {{"process_growth_bytes", 800},
        {"weights", {{"bytes", 10}, {"confidence", "high"}}},
        {"estimate", {{"weights_bytes", 11}, {"kv_cache_bytes", 19}}}}},
      {"conditions",
       json::array({{{"condition", "c4 p64"},
                     {"concurrency", 4},
                     {"n_requests", 4},
                     {"tokens_per_second", 50.0},
                     {"output_tokens", 100},
                     {"wall_ms", 2000},
                     {"latency_stats", {{"ttft_ms", {{"p50", 7.0}, {"p99", 9.0}}}}}}})}};
  auto r = results::parse_run_summary(bench.dump(), "", "/x/b1");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->kind, "bench");
  EXPECT_EQ(r->model, "tiny.gguf");
  EXPECT_EQ(r->baseline_bytes, 100U);
  EXPECT_EQ(r->peak_bytes, 900U);
  EXPECT_EQ(r->measured.at("weights").bytes, 10U);
  EXPECT_EQ(r->measured.at("total").bytes, 800U);
  EXPECT_EQ(r->reported.at("kv_cache"), 20U);
  EXPECT_EQ(r->estimated.at("kv_cache"), 19.0);
  EXPECT_EQ(r->settings.at("bench.parallel"), "4");
  ASSERT_EQ(r->conditions.size(), 1U);
  EXPECT_EQ(r->conditions[0].ttft_p99_ms, 9.0);
  EXPECT_DOUBLE_EQ(r->tokens_per_s, 50.0);

  EXPECT_EQ(results::parse_run_summary("{", "", "d").error().kind, ErrorKind::input);
  EXPECT_EQ(results::parse_run_summary(R"({"a": 1})", "", "d").error().kind, ErrorKind::input);
  EXPECT_EQ(results::parse_run_summary(bench.dump(), "[", "d").error().kind, ErrorKind::input);
  // Wrong types are absent figures, never a crash.
  const json odd = {{"run_id", 5},
                    {"memory_measurements", {{"baseline", {{"per_gpu_details", "x"}}}}},
                    {"memory_breakdown", {{"components", {{"weights", 3}}}}},
                    {"conditions", json::array({1, "x"})}};
  auto o = results::parse_run_summary(odd.dump(), R"({"configuration": [1]})", "d");
  ASSERT_TRUE(o.has_value());
  EXPECT_FALSE(o->baseline_bytes);
  EXPECT_EQ(o->conditions.size(), 2U);
}

// A GPU's used memory and a process's RSS are not one quantity: a profile run on a GPU against a
// bench run on the CPU shows both figures and no difference between them.
TEST(CompareRuns, GpuMemoryAndHostRssAreNotSubtracted) {
  const json gpu_run = {
      {"run_id", "p1"},
      {"memory_measurements",
       {{"baseline", {{"total_bytes", 50ULL << 30}}}, {"peak", {{"total_bytes", 70ULL << 30}}}}}};
  const json bench = {
      {"kind", "bench"},
      {"run_id", "b1"},
      {"host_memory",
       {{"phases", {{"before_load", {{"rss_bytes", 100}}}}}, {"peak_rss_bytes", 900}}}};
  auto p = results::parse_run_summary(gpu_run.dump(), "", "/x/p1");
  auto b = results::parse_run_summary(bench.dump(), "", "/x/b1");
  ASSERT_TRUE(p && b);
  ASSERT_NE(p->memory, b->memory);
  const auto c = compare_runs({*p, *b}, {});
  bool peak_shown = false;
  for (const auto& row : c.memory) {
    if (row.name != "peak") continue;
    peak_shown = true;
    EXPECT_EQ(row.values[0], static_cast<double>(70ULL << 30));
    EXPECT_FALSE(row.values[1].has_value());
    EXPECT_FALSE(row.diff[0].has_value());
  }
  EXPECT_TRUE(peak_shown);
  // Two runs of one kind still differ.
  const auto same = compare_runs({*b, *b}, {});
  bool diffed = false;
  for (const auto& row : same.memory)
    diffed = diffed || (row.name == "peak" && row.diff[0] == 0.0);
  EXPECT_TRUE(diffed);
}

TEST(CompareRuns, LongSettingsAreCutBetweenCharacters) {
  // A 300-byte cut that would fall inside a two-byte character: the value must stay valid UTF-8
  // (a JSON dump of invalid UTF-8 throws), cut before that character.
  std::string note(299, 'a');
  for (int i = 0; i < 10; ++i)
    note += "\xc3\xa9";  // e-acute
  const json bench = {{"schema_version", 1},
                      {"kind", "bench"},
                      {"run_id", note},
                      {"settings", {{"model", "/m/tiny.gguf"}, {"note", note}}}};
  auto r = results::parse_run_summary(bench.dump(), "", "/x/b1");
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->settings.at("bench.note"), std::string(299, 'a') + "...");
  EXPECT_EQ(r->id, std::string(299, 'a'));
  const auto c = compare_runs({*r, *r}, {});
  EXPECT_NO_THROW((void)comparison_json(c).dump());
}

TEST(CompareRuns, EstimateCompareShowsTheGraphDifference) {
  const auto r = test::run_kvprof(
      "estimate -m meta-llama/Llama-3.1-8B-Instruct -g H100 --max-num-seqs 256 --json "
      "--compare \"\" \"--enforce-eager\"");
  ASSERT_EQ(r.rc, 0) << r.out;
  const json j = parse_output(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;
  const uint32_t graphs =
      estimate::vllm_cuda_graph_count(estimate::vllm_cuda_graph_sizes(256), 256, 1);
  EXPECT_EQ(graphs, 51U + 35U);
  EXPECT_EQ(j.at("a").at("cuda_graphs"), graphs);
  EXPECT_EQ(j.at("b").at("cuda_graphs"), 0);
  EXPECT_EQ(j.at("extra_cuda_graphs"), -static_cast<int>(graphs));
  EXPECT_LT(j.at("memory_overhead_bytes").get<double>(), 0);
  for (const auto& row : j.at("components")) {
    if (row.at("component") == "cuda_graph") {
      EXPECT_EQ(row.at("b_bytes"), 0.0);
    }
    if (row.at("component") == "weights") {
      EXPECT_EQ(row.at("diff_bytes"), 0.0);
    }
  }
  EXPECT_NE(test::run_kvprof("estimate --compare \"--enforce-eager\"").rc, 0);
}

TEST(CompareRuns, SpeculationWithRuntimeControlDoublesTensorRtLlmsGraphs) {
  // Seed 000's experiment: max_batch_size 32, draft length 4; speculation always on captures one
  // graph per batch size (1..32) for draft length 4, runtime control captures draft length 0 too.
  const auto r = test::run_kvprof(
      "estimate -m deepseek-r1-distill-llama-8b -g H100 --engine trtllm --max-num-seqs 32 "
      "--num-speculative-tokens 4 --json --compare \"\" \"--spec-runtime-control\"");
  ASSERT_EQ(r.rc, 0) << r.out;
  const json j = parse_output(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j.at("a").at("cuda_graph_sets"), json({{"draft_len_4", 32}}));
  EXPECT_EQ(j.at("b").at("cuda_graph_sets"), json({{"draft_len_4", 32}, {"draft_len_0", 32}}));
  EXPECT_EQ(j.at("a").at("cuda_graphs"), 32);
  EXPECT_EQ(j.at("extra_cuda_graphs"), 32);
  // The graphs' memory, and the KV cache TensorRT-LLM gave up for it (it sizes the cache from
  // what is free after the warm-up): the total alone hides most of it.
  const double graphs = j.at("cuda_graph_diff_bytes").get<double>();
  EXPECT_GT(graphs, 0);
  EXPECT_LT(j.at("kv_cache_diff_bytes").get<double>(), 0);
  EXPECT_LT(std::abs(j.at("memory_overhead_bytes").get<double>()), graphs);
  EXPECT_DOUBLE_EQ(j.at("memory_per_extra_graph_bytes").get<double>(), graphs / 32);

  const auto text = test::run_kvprof(
      "estimate -m deepseek-r1-distill-llama-8b -g H100 --engine trtllm --max-num-seqs 32 "
      "--num-speculative-tokens 4 --compare \"\" \"--spec-runtime-control\"");
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("  of which CUDA graphs"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("  draft_len_0"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("+32 CUDA graphs"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("where it came from: the CUDA graphs take +"), std::string::npos)
      << text.out;
}

class CompareE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = fs::path(::testing::TempDir()) / ("kvprof_compare_" + std::to_string(::getpid()));
    fs::remove_all(s_dir);
    fs::create_directories(s_dir);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(s_dir, ec);
  }

  // One profile run of a launched serve-sim (the binary at `bin`) with `extra` serve-sim flags;
  // its run folder.
  static fs::path launch_run(const std::string& tag, const std::string& extra,
                             const std::string& bin = KVPROF_BIN) {
    const fs::path live = s_dir / "live.txt";
    const std::string serve = bin +
                              " serve-sim --model {model} --gpu H100 --host {host} --port {port} "
                              "--num-gpu-blocks 600 --max-model-len 2048 "
                              "--cuda-graph-bytes-per-graph 8MiB --vllm-startup-log "
                              "--startup-line-delay-ms 5 --live-state " +
                              live.string() + " " + extra;
    const auto r = test::run_kvprof(
        "profile --output-dir " + (s_dir / "results").string() + " --run-tag " + tag +
        " --baseline-s 0.2 --post-warmup-s 0.1 --input-lens 64 --output-lens 8 "
        "--concurrencies 2 --prefix-modes low -q --model sim-llama --launch \"" +
        serve + "\"");
    EXPECT_EQ(r.rc, 0) << r.out;
    for (const auto& e : fs::directory_iterator(s_dir / "results")) {
      if (e.path().filename().string().ends_with(tag)) return e.path();
    }
    ADD_FAILURE() << "no run folder for " << tag;
    return {};
  }

  static inline fs::path s_dir;
};

TEST_F(CompareE2E, CudaGraphSettingsReproduceTheGraphMemoryTheEngineWasGiven) {
  ::unsetenv("KVPROF_URL");
  ::unsetenv("KVPROF_MODEL");
  ::setenv("KVPROF_NVML_LIBRARY", KVPROF_FAKE_NVML_PATH, 1);
  ::setenv("KVPROF_FAKE_NVML_GPUS", "1", 1);
  ::setenv("KVPROF_FAKE_NVML_LIVE", (s_dir / "live.txt").c_str(), 1);
  // One server launched from a deep folder, as from a clone at a long path: its command is over
  // 400 characters, and its flags must still read whole.
  fs::path deep = s_dir;
  for (int i = 0; i < 8; ++i)
    deep /= "a-folder-name-of-forty-characters-" + std::to_string(100000 + i);
  fs::create_directories(deep);
  fs::create_symlink(KVPROF_BIN, deep / "kvprof");
  const fs::path eager = launch_run("eager", "--enforce-eager", (deep / "kvprof").string());
  const fs::path graphs = launch_run("graphs", "");
  const fs::path fewer = launch_run("seqs64", "--max-num-seqs 64");
  ::unsetenv("KVPROF_NVML_LIBRARY");
  ::unsetenv("KVPROF_FAKE_NVML_GPUS");
  ::unsetenv("KVPROF_FAKE_NVML_LIVE");
  const std::string flags = "--model meta-llama/Llama-3.1-8B-Instruct --gpu H100 ";
  const auto r = test::run_kvprof(
      "compare " + eager.string() + " " + graphs.filename().string() + " " + fewer.string() +
      " --results-dir " + (s_dir / "results").string() + " --json --estimate-with \"" + flags +
      "--max-num-seqs 256 --enforce-eager\" --estimate-with \"" + flags +
      "--max-num-seqs 256\" --estimate-with \"" + flags + "--max-num-seqs 64\"");
  ASSERT_EQ(r.rc, 0) << r.out;
  const json j = parse_output(r.out);
  ASSERT_TRUE(j.is_object()) << r.out;

  // Only the launch flags differ.
  std::vector<std::string> names;
  for (const auto& s : j.at("settings_that_differ"))
    names.push_back(s.at("name"));
  EXPECT_EQ(names, (std::vector<std::string>{"launch --enforce-eager", "launch --max-num-seqs"}))
      << j.at("settings_that_differ").dump();

  // The graphs each engine's log counted, and the memory they cost: exactly 8 MiB each.
  const uint64_t per_graph = 8ULL << 20;
  const uint32_t graphs_256 =
      estimate::vllm_cuda_graph_count(estimate::vllm_cuda_graph_sizes(256), 256, 1);
  const uint32_t graphs_64 =
      estimate::vllm_cuda_graph_count(estimate::vllm_cuda_graph_sizes(64), 64, 1);
  const auto& g = j.at("cuda_graphs");
  ASSERT_EQ(g.size(), 2U);
  EXPECT_EQ(g[0].at("graphs_first"), 0);
  EXPECT_EQ(g[0].at("graphs"), graphs_256);
  EXPECT_EQ(g[0].at("extra_graphs"), graphs_256);
  EXPECT_EQ(g[0].at("memory_overhead_bytes"), graphs_256 * per_graph) << g[0];
  EXPECT_DOUBLE_EQ(g[0].at("memory_per_extra_graph_bytes").get<double>(), per_graph);
  EXPECT_GT(g[0].at("memory_increase_pct").get<double>(), 0);
  // The engine's own "took X GiB" is printed to 0.01 GiB.
  EXPECT_NEAR(g[0].at("reported_graph_bytes_diff").get<double>(), graphs_256 * per_graph,
              0.005 * (1 << 30));
  EXPECT_EQ(g[1].at("extra_graphs"), graphs_64);
  EXPECT_EQ(g[1].at("memory_overhead_bytes"), graphs_64 * per_graph);
  // The estimate predicts the same graph counts and a graph memory of its own beside them.
  EXPECT_EQ(g[0].at("estimated_extra_graphs"), graphs_256);
  EXPECT_EQ(g[1].at("estimated_extra_graphs"), graphs_64);
  EXPECT_GT(g[0].at("estimated_overhead_bytes").get<double>(), 0);

  // Memory rows: baseline B - A is the graph memory, with its % change.
  bool seen = false;
  for (const auto& row : j.at("memory")) {
    if (row.at("name") != "after startup (baseline)") continue;
    seen = true;
    EXPECT_EQ(row.at("diff_vs_first")[0], graphs_256 * per_graph);
    EXPECT_GT(row.at("pct_change_vs_first")[0].get<double>(), 0);
  }
  EXPECT_TRUE(seen);
  EXPECT_FALSE(j.at("latency").empty());

  // The text names the overhead; broken inputs are one-line errors.
  const auto text = test::run_kvprof("compare " + eager.string() + " " + graphs.string());
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("memory per extra graph: 8.0 MiB"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("launch --enforce-eager"), std::string::npos);
  const auto missing = test::run_kvprof("compare " + eager.string() + " no_such_run");
  EXPECT_EQ(missing.rc, 2) << missing.out;
  EXPECT_EQ(std::count(missing.out.begin(), missing.out.end(), '\n'), 1) << missing.out;
  EXPECT_EQ(test::run_kvprof("compare " + eager.string()).rc, 2);
}

}  // namespace
}  // namespace kvprof::experiment
