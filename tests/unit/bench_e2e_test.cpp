// `kvprof bench` end to end: the kvprof binary runs the real libllama on a tiny GGUF and writes
// the run folder; memory grows with concurrency by the KV cache of each context; Ctrl-C, a
// crashing engine, a file the engine refuses and a missing library each leave the folder.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "kvprof/results/run_folder.hpp"
#include "support/run_kvprof.hpp"
#include "support/tiny_llama.hpp"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

using kvprof::test::Run;
using kvprof::test::run_kvprof;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("kvprof_bench_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The only run folder under `out`.
fs::path run_dir(const fs::path& out) {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(out))
    if (e.is_directory()) dirs.push_back(e.path());
  EXPECT_EQ(dirs.size(), 1U);
  return dirs.empty() ? fs::path() : dirs.front();
}

json read_json(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << file;
  return json::parse(in, nullptr, false);
}

size_t count_lines(const fs::path& file) {
  std::ifstream in(file);
  size_t n = 0;
  for (std::string line; std::getline(in, line);)
    ++n;
  return n;
}

TEST(BenchE2e, GridOnRealEngineWritesEveryFileAndKvGrowsWithConcurrency) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  const fs::path dir = fresh_dir("grid");
  const kvprof::test::TinyLlama shape;
  kvprof::test::write_tiny_llama(dir / "tiny.gguf", shape);
  const auto r = run_kvprof("bench -m " + (dir / "tiny.gguf").string() +
                            " --concurrency 1,2,4 --prompt-toks 100 --gen-toks 12 --llama-lib " +
                            lib_dir->string() + " --output-dir " + (dir / "out").string());
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("c4 p100"), std::string::npos) << r.out;
  // The model by its own name (general.name), llama.cpp's size class beside it.
  EXPECT_NE(r.out.find("model: kvprof-tiny-llama (llama.cpp: llama "), std::string::npos) << r.out;
  const fs::path run = run_dir(dir / "out");
  for (const char* f :
       {"summary.json", "manifest.json", "engine.log", "request_trace.csv", "host_mem_trace.csv"}) {
    EXPECT_TRUE(fs::exists(run / f)) << f;
  }
  const json s = read_json(run / "summary.json");
  EXPECT_EQ(s["status"], "completed");
  EXPECT_EQ(s["engine"]["library"]["package"], "@node-llama-cpp/linux-x64@3.22.1");
  ASSERT_EQ(s["conditions"].size(), 3U);
  const uint64_t per_cell = shape.n_layer * shape.kv_f16_bytes_per_token_layer();
  for (const auto& c : s["conditions"]) {
    const uint64_t conc = c["concurrency"];
    EXPECT_TRUE(c["finished"].get<bool>());
    EXPECT_EQ(c["n_requests"], conc);
    // Each context is sized for its condition: n_ctx = concurrency x 112 tokens, up to 256.
    const uint64_t n_ctx = (conc * 112 + 255) / 256 * 256;
    EXPECT_EQ(c["n_ctx"], n_ctx);
    EXPECT_EQ(c["kv_cache_bytes"], n_ctx * per_cell) << c.dump();
    EXPECT_GT(c["output_tokens_per_s"].get<double>(), 0.0);
    EXPECT_GT(c["ttft_ms"]["p50"].get<double>(), 0.0);
    EXPECT_EQ(c["itl_ms"]["n"], 11U);  // 12 tokens: 1 from the prefill + 11 steps
    EXPECT_GT(c["peak_rss_bytes"].get<uint64_t>(), 0U);
    // kvprof's own work between llama.cpp's decode calls is small (checked precisely in
    // benchmarks/).
    EXPECT_GT(c["llama_cpp_share_of_wall"].get<double>(), 0.5);
  }
  const auto& breakdown = s["memory_breakdown"];
  const auto& bd = breakdown["components"];
  EXPECT_EQ(bd["weights"]["confidence"], "high");
  EXPECT_GT(bd["weights"]["bytes"].get<uint64_t>(), 0U);
  EXPECT_EQ(bd["kv_cache"]["bytes"], s["conditions"][2]["kv_cache_bytes"]);
  EXPECT_TRUE(bd["overhead"]["bytes"].is_number());
  // The parts add up to the process's growth (overhead the residual, below zero if it must be).
  int64_t parts = 0;
  for (const char* part : {"weights", "kv_cache", "activations", "overhead"})
    parts += bd[part]["bytes"].get<int64_t>();
  EXPECT_EQ(parts, breakdown["total_measured_bytes"].get<int64_t>()) << breakdown.dump(1);
  EXPECT_EQ(breakdown["total_measured_bytes"], breakdown["process_growth_bytes"]);
  // Profile's layout, so the predecessor's jq recipes (document 003) read a bench run too.
  EXPECT_EQ(s["schema_version"], "2.0");
  EXPECT_EQ(s["profiler_version"], "2.0");
  EXPECT_EQ(s["engine_metadata"]["engine_type"], "llamacpp");
  EXPECT_NEAR(breakdown["total_measured_gb"].get<double>(),
              breakdown["total_measured_bytes"].get<double>() / (1 << 30), 1e-9);
  EXPECT_EQ(breakdown["model_weights_bytes"], bd["weights"]["bytes"]);
  EXPECT_TRUE(breakdown["framework_overhead_gb"].is_number());
  EXPECT_EQ(breakdown["confidence_levels"]["weights"], "high");
  const auto& mm = s["memory_measurements"];
  EXPECT_EQ(mm["baseline"]["total_bytes"],
            s["host_memory"]["phases"]["after_context"]["rss_bytes"]);
  EXPECT_EQ(mm["peak"]["total_bytes"], s["host_memory"]["peak_rss_bytes"]);
  EXPECT_GT(mm["baseline"]["total_bytes"].get<uint64_t>(),
            s["host_memory"]["phases"]["before_load"]["rss_bytes"].get<uint64_t>());
  EXPECT_NEAR(mm["memory_increase_gb"].get<double>(),
              mm["peak"]["total_gb"].get<double>() - mm["baseline"]["total_gb"].get<double>(),
              1e-9);
  EXPECT_GT(s["latency_stats"]["tokens_per_second"].get<double>(), 0.0);
  EXPECT_EQ(s["requests"]["n_ok"], 1 + 2 + 4);
  // Document 003's recipes, run by Debian's jq on the bench run's summary.json as they are
  // printed there.
  const std::string summary_path = (run / "summary.json").string();
  for (const char* check : {"-e '.profiler_version == \"2.0\"'", "-e '.schema_version == \"2.0\"'",
                            "-e '.memory_breakdown.total_measured_gb > 0'",
                            "-e '.memory_measurements.memory_increase_gb >= 0'",
                            "-e '.memory_breakdown | .model_weights_gb + .kv_cache_gb + "
                            ".activations_gb + .framework_overhead_gb - .total_measured_gb | "
                            "fabs < 1e-9'",
                            "-e '.latency_stats.tokens_per_second > 0'"}) {
    const auto jq = kvprof::test::run_jq(std::string(check) + " " + summary_path);
    EXPECT_EQ(jq.rc, 0) << check << ": " << jq.out;
  }
  const auto diff = kvprof::test::run_jq(
      "-s '.[0].memory_breakdown.total_measured_gb as $a | .[1].memory_breakdown.total_measured_gb "
      "as $b | {diff_gb: ($b - $a)}' " +
      summary_path + " " + summary_path);
  EXPECT_EQ(diff.rc, 0) << diff.out;
  EXPECT_NE(diff.out.find("\"diff_gb\": 0"), std::string::npos) << diff.out;
  // kvprof's own reader gets the same figures from either command's summary.
  const auto typed = kvprof::results::load_run(run.string(), dir / "out");
  ASSERT_TRUE(typed) << typed.error().message;
  ASSERT_EQ(typed->conditions.size(), 3U);
  EXPECT_EQ(typed->conditions[2].id, s["conditions"][2]["condition_id"]);
  EXPECT_EQ(typed->conditions[2].n_ok, 4U);
  EXPECT_GT(typed->conditions[2].ttft_p50_ms, 0.0);
  EXPECT_EQ(typed->measured.at("weights").bytes, bd["weights"]["bytes"].get<uint64_t>());
  EXPECT_NEAR(typed->tokens_per_s, s["latency_stats"]["tokens_per_second"].get<double>(), 1e-6);
  EXPECT_EQ(count_lines(run / "request_trace.csv"), 1U + 1 + 2 + 4);
  EXPECT_GT(count_lines(run / "host_mem_trace.csv"), 1U);
  std::ifstream log(run / "engine.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find("KV buffer size"), std::string::npos);
  EXPECT_EQ(read_json(run / "manifest.json")["status"], "completed");
}

// Starts kvprof bench in the background; returns its pid.
pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::freopen(log.c_str(), "w", stdout);
    (void)f;
    dup2(fileno(stdout), 2);
    std::vector<char*> argv;
    std::string bin = KVPROF_BIN;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(KVPROF_BIN, argv.data());
    _exit(127);
  }
  return pid;
}

// The first child process of `pid` (the engine worker), or 0.
pid_t child_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t child = 0;
  in >> child;
  return child;
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::vector<std::string> long_run(const fs::path& dir, const fs::path& lib) {
  return {"bench",
          "-m",
          (dir / "tiny.gguf").string(),
          "--concurrency",
          "1",
          "--prompt-toks",
          "16",
          "--gen-toks",
          "30000",
          "--llama-lib",
          lib.string(),
          "--output-dir",
          (dir / "out").string()};
}

// Waits until the worker reports its first condition (the summary is only final at the end, so
// this watches the engine log growing past the context creation).
void wait_for_engine(const fs::path& out) {
  for (int i = 0; i < 200; ++i) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out, ec)) {
      if (fs::exists(e.path() / "engine.log") && count_lines(e.path() / "engine.log") > 40) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

TEST(BenchE2e, CtrlCKeepsWhatWasMeasured) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  const fs::path dir = fresh_dir("sigint");
  kvprof::test::write_tiny_llama(dir / "tiny.gguf");
  const pid_t pid = spawn(long_run(dir, *lib_dir), dir / "log.txt");
  wait_for_engine(dir / "out");
  // Past loading and the 16-token prefill, into the 30,000 generation steps (~20 s).
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 130);
  const fs::path run = run_dir(dir / "out");
  const json s = read_json(run / "summary.json");
  EXPECT_EQ(s["status"], "interrupted");
  EXPECT_TRUE(s["interrupted"].get<bool>());
  ASSERT_EQ(s["conditions"].size(), 1U);
  EXPECT_TRUE(s["conditions"][0]["started"].get<bool>());
  EXPECT_FALSE(s["conditions"][0]["finished"].get<bool>());
  // The steps run before Ctrl-C are kept.
  EXPECT_GT(s["conditions"][0]["itl_ms"]["n"].get<uint64_t>(), 0U);
  EXPECT_EQ(read_json(run / "manifest.json")["status"], "interrupted");
}

TEST(BenchE2e, EngineCrashKeepsTheRunFolder) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  const fs::path dir = fresh_dir("crash");
  kvprof::test::write_tiny_llama(dir / "tiny.gguf");
  const pid_t pid = spawn(long_run(dir, *lib_dir), dir / "log.txt");
  wait_for_engine(dir / "out");
  const pid_t worker = child_of(pid);
  ASSERT_GT(worker, 0);
  kill(worker, SIGSEGV);  // as if libllama crashed
  EXPECT_EQ(wait_exit(pid), 1);
  const fs::path run = run_dir(dir / "out");
  const json s = read_json(run / "summary.json");
  EXPECT_EQ(s["status"], "crashed");
  EXPECT_NE(s["error"].get<std::string>().find("signal 11"), std::string::npos) << s["error"];
  EXPECT_FALSE(s["engine_last_log_lines"].empty());
  EXPECT_TRUE(fs::exists(run / "engine.log"));
  EXPECT_TRUE(fs::exists(run / "host_mem_trace.csv"));
}

TEST(BenchE2e, FileTheEngineRefusesExits2AndSaysWhy) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  const fs::path dir = fresh_dir("refused");
  std::ofstream(dir / "bad.gguf") << "this is not a GGUF model";
  const auto r = run_kvprof("bench -m " + (dir / "bad.gguf").string() + " --llama-lib " +
                            lib_dir->string() + " --output-dir " + (dir / "out").string());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("could not load"), std::string::npos) << r.out;
  const json s = read_json(run_dir(dir / "out") / "summary.json");
  EXPECT_EQ(s["status"], "refused");
  // Only its record: one line, no table, no report of a run that measured nothing.
  EXPECT_EQ(r.out.find("results: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("report: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("its record: "), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(run_dir(dir / "out") / "report.html"));
}

TEST(BenchE2e, MissingLibraryIsOneLineAndExit1) {
  const fs::path dir = fresh_dir("nolib");
  kvprof::test::write_tiny_llama(dir / "tiny.gguf");
  fs::create_directories(dir / "empty");
  const auto r = run_kvprof("bench -m " + (dir / "tiny.gguf").string() + " --llama-lib " +
                            (dir / "empty").string() + " --output-dir " + (dir / "out").string());
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("no libllama found"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fetch_llama.sh"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_FALSE(fs::exists(dir / "out"));  // nothing measured, no folder
}

TEST(BenchE2e, CheckOomAnswersFromThePlanWithoutLoadingTheModel) {
  // No libllama at all: the plan needs only the GGUF's header.
  const fs::path dir = fresh_dir("checkoom");
  kvprof::test::write_tiny_llama(dir / "tiny.gguf");
  fs::create_directories(dir / "empty");
  auto r = run_kvprof("bench -m " + (dir / "tiny.gguf").string() +
                      " --check-oom --concurrency 1,4 --llama-lib " + (dir / "empty").string() +
                      " --output-dir " + (dir / "out").string() + " --json");
  EXPECT_EQ(r.rc, 0) << r.out;
  auto j = kvprof::test::json_in(r.out);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_TRUE(j.at("fits").get<bool>());
  ASSERT_EQ(j.at("conditions").size(), 2U);
  EXPECT_GT(j.at("conditions")[0].at("plan").at("host_total_bytes").get<uint64_t>(), 0U);
  EXPECT_FALSE(fs::exists(dir / "out"));  // nothing was run

  // 64 layers of 4 KV heads at 2M cells: 64 GiB of KV cache, more than this machine has.
  kvprof::test::TinyLlama big;
  big.n_layer = 64;
  big.n_head_kv = 4;
  kvprof::test::write_tiny_llama(dir / "big.gguf", big);
  r = run_kvprof("bench -m " + (dir / "big.gguf").string() +
                 " --check-oom -c 2097152 --llama-lib " + (dir / "empty").string() +
                 " --output-dir " + (dir / "out").string());
  EXPECT_EQ(r.rc, 4) << r.out;
  EXPECT_NE(r.out.find("NO"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kvprof: error: does not fit: "), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "out"));
}

TEST(BenchE2e, ContextTooSmallForTheGridIsAUsageError) {
  const fs::path dir = fresh_dir("small");
  kvprof::test::write_tiny_llama(dir / "tiny.gguf");
  const auto r = run_kvprof("bench -m " + (dir / "tiny.gguf").string() +
                            " --concurrency 4 --prompt-toks 100 -c 256 --output-dir " +
                            (dir / "out").string());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("raise -c"), std::string::npos) << r.out;
}

}  // namespace
