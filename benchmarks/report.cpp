// Time to write the report of a 1-hour run sampled at 1 kHz (Google Benchmark): a synthetic run
// folder — gpu_mem_trace.csv with 3.6 million device rows, a 10 Hz metrics trace, 36,000
// requests over 12 conditions — is written once into $KVPROF_BENCH_DIR (default /tmp), then
// read back (load_run) and turned into report.html (load_run + report + write). Goal: under 2 s.
// The page it leaves (kvprof-report-benchmarks/report.html) is the one whose opening time is
// measured with tests/browser/report_test.mjs --open-timing (docs/benchmarks.md).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "kvprof/report/html/page.hpp"
#include "kvprof/report/html/run_data.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kvprof;

constexpr int64_t k_t0_ns = 1'000'000'000'000;
constexpr int64_t k_wall0_ms = 1'800'000'000'000;
constexpr int k_seconds = 3600;
constexpr int k_conditions = 12;

fs::path bench_dir() {
  const char* env = std::getenv("KVPROF_BENCH_DIR");
  return fs::path(env != nullptr ? env : "/tmp") / "kvprof-report-bench";
}

// Writes the synthetic run once (about 300 MB); later runs reuse it.
const fs::path& synthetic_run() {
  static const fs::path dir = [] {
    const fs::path d = bench_dir();
    if (fs::exists(d / "summary.json")) return d;
    fs::create_directories(d);
    std::mt19937 rng(1);
    std::normal_distribution<double> noise(0, 2e6);
    const double base = 70.0 * (1 << 30);
    {
      std::ofstream gpu(d / "gpu_mem_trace.csv");
      gpu << "t_mono_ns,t_wall_ms,kind,gpu,pid,total_bytes,reserved_bytes,free_bytes,used_bytes\n";
      std::string rows;
      for (int64_t i = 0; i < int64_t{k_seconds} * 1000; ++i) {
        const int cond = static_cast<int>(i / (k_seconds * 1000 / k_conditions));
        const double load = (i % 300'000) > 1000 ? 0.2 * (cond + 1) * (1 << 30) : 0;
        const auto used =
            static_cast<uint64_t>(base + load + noise(rng) + (i % 600'000 == 7 ? 3e9 : 0));
        fmt::format_to(std::back_inserter(rows), "{},{},device,0,,85029158912,0,{},{}\n",
                       k_t0_ns + i * 1'000'000, k_wall0_ms + i, 85029158912 - used, used);
        if (rows.size() > (1 << 20)) {
          gpu << rows;
          rows.clear();
        }
      }
      gpu << rows;
    }
    {
      std::ofstream m(d / "metrics_trace.csv");
      m << "mono_ns,wall_ms,status,scrape_ms,engine,kv_cache_usage,kv_cache_used_tokens\n";
      for (int64_t i = 0; i < int64_t{k_seconds} * 10; ++i) {
        m << fmt::format("{},{},ok,0.5,vllm,{:.4f},\n", k_t0_ns + i * 100'000'000,
                         k_wall0_ms + i * 100, 0.5 + 0.4 * std::sin(static_cast<double>(i) / 300));
      }
    }
    {
      std::ofstream r(d / "request_trace.csv");
      r << "request_id,condition_id,status,actual_send_unix_s,end_unix_s\n";
      for (int i = 0; i < 36'000; ++i) {
        const double send = static_cast<double>(k_wall0_ms) / 1000 + i * 0.1;
        r << fmt::format("{},c{},ok,{:.6f},{:.6f}\n", i, i / 3000, send, send + 0.9);
      }
    }
    nlohmann::json conditions = nlohmann::json::array();
    const int64_t span_ns = int64_t{k_seconds} * 1'000'000'000 / k_conditions;
    for (int c = 0; c < k_conditions; ++c) {
      const nlohmann::json p = {
          {"p50", 10.0 * (c + 1)}, {"p90", 12.0 * (c + 1)}, {"p99", 15.0 * (c + 1)}, {"n", 3000}};
      conditions.push_back(
          {{"condition_id", fmt::format("in{}_out128_c{}_low", c < 6 ? 512 : 2048, 1 << (c % 6))},
           {"concurrency", 1 << (c % 6)},
           {"window",
            {{"start_mono_ns", k_t0_ns + c * span_ns},
             {"end_mono_ns", k_t0_ns + (c + 1) * span_ns}}},
           {"peak_used_bytes", base + 0.2 * (c + 1) * (1 << 30)},
           {"output_tokens_per_s", 500.0 * (1 << (c % 6))},
           {"peak_kv_cache_usage", 0.1 * (c % 6)},
           {"ttft_ms", p},
           {"itl_ms", p},
           {"e2e_ms", p}});
    }
    const nlohmann::json window = {{"start_mono_ns", k_t0_ns},
                                   {"end_mono_ns", k_t0_ns + 900'000'000}};
    const nlohmann::json summary = {
        {"schema_version", 1},
        {"profiler_version", "bench"},
        {"run_id", "bench_1h_1khz"},
        {"simulated", false},
        {"memory_source", "nvml"},
        {"model_info", {{"name", "meta-llama/Llama-3.1-8B-Instruct"}}},
        {"engine_metadata", {{"engine_type", "vllm"}, {"engine_version", "0.10.1"}}},
        {"gpus", {{{"index", 0}, {"name", "NVIDIA H100 80GB HBM3"}}}},
        {"memory_measurements", {{"baseline", {{"total_bytes", base}, {"window", window}}}}},
        {"conditions", conditions}};
    std::ofstream(d / "summary.json") << summary.dump();
    return d;
  }();
  return dir;
}

void BM_LoadRun1h1kHz(benchmark::State& state) {
  const fs::path& dir = synthetic_run();
  for (auto _ : state) {
    auto run = report::html::load_run_data(dir);
    if (!run) state.SkipWithError(run.error().message.c_str());
    benchmark::DoNotOptimize(run);
  }
}
BENCHMARK(BM_LoadRun1h1kHz)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_WriteReport1h1kHz(benchmark::State& state) {
  const fs::path& dir = synthetic_run();
  uint64_t bytes = 0;
  for (auto _ : state) {
    auto run = report::html::load_run_data(dir);
    if (!run) state.SkipWithError(run.error().message.c_str());
    auto written =
        report::html::write_report(std::span<const report::html::RunData>(&*run, 1), dir, {});
    if (!written) state.SkipWithError(written.error().message.c_str());
    bytes = fs::file_size(dir / "report.html");
  }
  state.counters["report_bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_WriteReport1h1kHz)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
