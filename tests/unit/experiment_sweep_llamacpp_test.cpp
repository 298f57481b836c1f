// End-to-end: `kvprof sweep` of two real llama.cpp servers (`kvprof serve`, the real libllama,
// launched with their own -c and -np): planned as llama.cpp on the CPU from each launch command,
// the input length a slot cannot hold left out before the run, the servers' host memory in
// sweep.json and sweep_summary.csv, and the report drawing it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvprof/report/html/experiment_sections.hpp"
#include "support/run_kvprof.hpp"
#include "support/serve_process.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in, nullptr, false);
}

std::vector<std::string> csv_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

// The index of `name` in a CSV header line.
size_t column(const std::string& header, const std::string& name) {
  size_t i = 0, start = 0;
  while (true) {
    const size_t comma = header.find(',', start);
    if (header.substr(start, comma - start) == name) return i;
    if (comma == std::string::npos) return std::string::npos;
    start = comma + 1;
    ++i;
  }
}

std::string field(const std::string& line, size_t index) {
  size_t start = 0;
  for (size_t i = 0; i < index; ++i) {
    start = line.find(',', start);
    if (start == std::string::npos) return "";
    ++start;
  }
  return line.substr(start, line.find(',', start) - start);
}

TEST(SweepLlamaCpp, TwoServersPlannedFromTheirOwnFlagsOnTheCpu) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  test::ScopedTempDir tmp("kvprof_sweep_llama");
  const fs::path dir = tmp.path;
  ASSERT_TRUE(test::write_dummy_llama(dir / "tiny.gguf", 32000));
  const std::string serve = std::string(KVPROF_BIN) + " serve -m {model} --llama-lib " +
                            lib_dir->string() + " -t 1 -q --host {host} --port {port}";
  std::ofstream(dir / "llama.yaml")
      << "baseline_s: 0.2\npost_warmup_s: 0.2\nwarmup_requests: 1\n"
         "min_condition_s: 0.3\nlaunch_timeout_s: 60\n"
         "input_lengths: [64, 1500]\noutput_lengths: [8]\n"
         "batch_sizes: [1, 2]\nmodels:\n"
         "  - model_id: "
      << (dir / "tiny.gguf").string() << "\n    launch: \"" << serve
      << " -c 4096 -np 2\"\n  - model_id: " << (dir / "tiny.gguf").string() << "\n    launch: \""
      << serve << " -c 1024 -np 2\"\n";
  const std::string env = "KVPROF_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 KVPROF_OUTPUT_DIR=";
  const std::string args = "sweep --config " + (dir / "llama.yaml").string() + " --output-dir " +
                           (dir / "results").string();

  // The plan: llama.cpp on the CPU, each configuration with its own -c and slots.
  const auto dry = test::run_kvprof_env(env, args + " --dry-run --json");
  ASSERT_EQ(dry.rc, 0) << dry.out;
  const json plan = json::parse(dry.out.substr(dry.out.find('{')), nullptr, false);
  ASSERT_FALSE(plan.is_discarded()) << dry.out;
  const auto& configs = plan.at("configurations");
  ASSERT_EQ(configs.size(), 2U);
  for (const auto& c : configs) {
    EXPECT_EQ(c.at("gpu"), "cpu") << c.dump(1);
    EXPECT_EQ(c.at("settings").at("engine"), "llamacpp");
    EXPECT_TRUE(c.at("fits").get<bool>()) << c.at("reason");
    EXPECT_EQ(c.at("estimate").at("max_concurrency"), 2);  // -np 2
    // Seconds, not the minute a GPU server takes to start.
    EXPECT_LT(c.at("expected_s").get<double>(), 30.0);
  }
  // 4096 cells of the first and 1024 of the second: the KV cache is four times the size.
  const uint64_t kv0 = configs[0].at("estimate").at("kv_cache_bytes").get<uint64_t>();
  const uint64_t kv1 = configs[1].at("estimate").at("kv_cache_bytes").get<uint64_t>();
  EXPECT_EQ(kv0, 4 * kv1);
  // The second server's 1024 cells cannot take 1500 + 8 tokens: refused before the run.
  bool refused = false;
  for (const auto& cond : configs[1].at("conditions"))
    refused = refused || (cond.at("input_len") == 1500 && cond.at("refused").get<bool>());
  EXPECT_TRUE(refused) << configs[1].dump(1);
  EXPECT_NE(configs[1].at("notes").dump().find("input length 1500 not run"), std::string::npos)
      << configs[1].at("notes");
  EXPECT_EQ(configs[0].at("n_requests").get<int>(), 2 * configs[1].at("n_requests").get<int>());

  // The sweep: both servers run, their host memory measured.
  const auto r = test::run_kvprof_env(env, args + " -q");
  ASSERT_EQ(r.rc, 0) << r.out;
  const fs::path sdir = dir / "results" / "sweeps" / "llama";
  const json sweep = read_json(sdir / "sweep.json");
  ASSERT_FALSE(sweep.is_discarded());
  for (const auto& c : sweep.at("configurations")) {
    EXPECT_EQ(c.at("status"), "done") << c.dump(1);
    EXPECT_GT(c.at("run").at("measured").value("peak_rss_bytes", 0.0), 1e6) << c.dump(1);
  }
  const auto lines = csv_lines(sdir / "sweep_summary.csv");
  ASSERT_EQ(lines.size(), 1U + 4 + 4);
  const size_t rss = column(lines[0], "peak_rss_bytes");
  const size_t input = column(lines[0], "input_len");
  ASSERT_NE(rss, std::string::npos) << lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    const bool ran = i <= 4 || field(lines[i], input) == "64";
    EXPECT_EQ(!field(lines[i], rss).empty(), ran) << lines[i];
  }
  // The sweep's report draws the servers' host memory: each configuration's peak RSS and its
  // heatmap of peaks over input length x batch size.
  const json section = report::html::sweep_section(sweep, sdir);
  EXPECT_EQ(section.at("memory_label"), "host memory (RSS)");
  for (const auto& c : section.at("configurations")) {
    EXPECT_TRUE(c.at("measured_peak").is_number()) << c.dump(1);
    size_t peaks = 0;
    for (const auto& cell : c.at("heatmaps").at(0).at("cells"))
      peaks += cell.at("peak").is_number() ? 1 : 0;
    EXPECT_GE(peaks, 2U) << c.dump(1);
  }
  // The report of a run draws the server's host memory.
  const std::string run_dir = sweep.at("configurations")[0].at("run").at("run_dir");
  const json summary = read_json(fs::path(run_dir) / "summary.json");
  // The run was compared with the configuration's llama.cpp plan: its KV cache of 4096 cells.
  const json& rows = summary.at("estimate_comparison").at("rows");
  bool kv_row = false;
  for (const auto& row : rows) {
    if (row.at("component") != "kv_cache") continue;
    kv_row = true;
    EXPECT_EQ(row.at("estimated").get<double>(), static_cast<double>(kv0));
  }
  EXPECT_TRUE(kv_row) << rows.dump(1);
  for (const auto& c : summary.at("conditions"))
    EXPECT_GT(c.value("peak_rss_bytes", 0.0), 1e6) << c.dump(1);
}

}  // namespace
}  // namespace kvprof
