// The largest legal sweep (256 configurations x 4,096 conditions = 1,048,576 conditions): its
// plan, and its state once every condition has figures (as after a finished sweep): writing and
// reading sweep_state.json and writing sweep.json and sweep_summary.csv after a configuration.
// Run each benchmark in its own process (--benchmark_filter) to read its peak memory (max_rss).
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "kvprof/experiment/sweep_plan.hpp"
#include "kvprof/experiment/sweep_state.hpp"
#include "kvprof/experiment/sweep_summary.hpp"
#include "kvprof/workload/workload.hpp"

namespace {

namespace fs = std::filesystem;
using namespace kvprof::experiment;

double max_rss_mib() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// 256 entries, each a 16 x 16 x 16 grid; distinct max_model_len, so distinct fingerprints.
std::string largest_sweep_yaml() {
  std::string lens;
  for (int i = 1; i <= 16; ++i)
    lens += fmt::format("{}{}", i == 1 ? "" : ", ", i * 16);
  std::string y = fmt::format(
      "name: largest\ngpu: H100\ninput_lengths: [{0}]\noutput_lengths: [{0}]\nbatch_sizes: "
      "[{0}]\nmodels:\n",
      lens);
  for (int i = 0; i < 256; ++i)
    y += fmt::format("  - model_id: meta-llama/Llama-3.1-8B-Instruct\n    max_model_len: {}\n",
                     4096 + i);
  return y;
}

Plan largest_plan() {
  const auto parsed = parse_sweep_config(largest_sweep_yaml());
  if (!parsed.ok()) throw std::runtime_error("the sweep file did not parse");
  std::vector<ConfigIssue> errors;
  return plan_sweep(parsed.config, PlanOptions{}, errors);
}

// Every configuration done, with figures for each of its conditions.
SweepState finished_state(const Plan& plan) {
  SweepState state;
  state.name = plan.name;
  for (const auto& pc : plan.configs) {
    ConfigRecord& r = state.records[pc.fingerprint];
    r.fingerprint = pc.fingerprint;
    r.id = pc.id;
    r.label = pc.label;
    r.status = "done";
    r.run_id = "20261129_000000_" + pc.id;
    for (const auto& c : pc.conditions) {
      ConditionFigures f;
      f.peak_used_bytes = 60e9 + c.input_len;
      f.peak_rss_bytes = 2e9;
      f.peak_kv_cache_usage = 0.5;
      f.ttft_p50_ms = 12.5;
      f.e2e_mean_ms = 250.0;
      f.output_tokens_per_s = 1234.5;
      f.preemptions = 0;
      f.n_ok = c.batch_size;
      f.n_errors = 0;
      r.conditions[kvprof::workload::condition_id(c.input_len, c.output_len, c.batch_size,
                                                  kvprof::workload::PrefixMode::low)] = f;
    }
  }
  return state;
}

fs::path bench_dir() {
  const fs::path dir = fs::temp_directory_path() / fmt::format("kvprof-bench-sweep-{}", ::getpid());
  fs::create_directories(dir);
  return dir;
}

// The memory in use now (resident), in MiB.
double rss_mib() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  in >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

void BM_PlanLargestSweep(benchmark::State& st) {
  for (auto _ : st) {
    const Plan plan = largest_plan();
    benchmark::DoNotOptimize(plan.n_conditions);
    st.counters["conditions"] = static_cast<double>(plan.n_conditions);
  }
  st.counters["max_rss_MiB"] = max_rss_mib();
}
BENCHMARK(BM_PlanLargestSweep)->Iterations(1)->Unit(benchmark::kMillisecond);

// Saving the state and the sweep's files, as after each configuration, then reading the state
// back, as a resumed sweep does.
void BM_LargestSweepStateRoundTrip(benchmark::State& st) {
  const Plan plan = largest_plan();
  st.counters["plan_MiB"] = rss_mib();
  const fs::path dir = bench_dir();
  for (auto _ : st) {
    {
      const SweepState state = finished_state(plan);
      st.counters["plan_and_state_MiB"] = rss_mib();
      const auto t0 = std::chrono::steady_clock::now();
      if (!save_state(dir, state)) st.SkipWithError("save_state failed");
      const auto t1 = std::chrono::steady_clock::now();
      if (!write_sweep_files(dir, plan, state, "largest.yaml", "completed"))
        st.SkipWithError("write_sweep_files failed");
      const auto t2 = std::chrono::steady_clock::now();
      st.counters["save_state_s"] = std::chrono::duration<double>(t1 - t0).count();
      st.counters["sweep_files_s"] = std::chrono::duration<double>(t2 - t1).count();
    }
    const auto t3 = std::chrono::steady_clock::now();
    const auto loaded = load_state(dir);
    st.counters["load_state_s"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t3).count();
    if (!loaded || loaded->records.size() != plan.configs.size())
      st.SkipWithError(loaded ? "the state lost configurations" : loaded.error().message.c_str());
  }
  std::error_code ec;
  uint64_t state_bytes = fs::file_size(dir / "sweep_state.json", ec);
  for (const auto& e : fs::directory_iterator(dir / "conditions", ec))
    state_bytes += e.file_size();
  st.counters["state_MiB"] = static_cast<double>(state_bytes) / (1 << 20);
  st.counters["sweep_json_MiB"] =
      static_cast<double>(fs::file_size(dir / "sweep.json", ec)) / (1 << 20);
  st.counters["max_rss_MiB"] = max_rss_mib();
  fs::remove_all(dir, ec);
}
BENCHMARK(BM_LargestSweepStateRoundTrip)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
