// The parent side of `kvprof bench`: creates the run folder, starts the engine worker in a child
// process, samples its host memory (and GPU memory through NVML when there is one) while it runs,
// collects its events, and writes request_trace.csv, summary.json and manifest.json — also when
// the worker fails, crashes or is interrupted.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/bench/bench_config.hpp"
#include "kvprof/gpu/memory_source.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::bench {

// Host memory of the engine process at one named moment.
struct PhaseMemory {
  std::string name;  // before_load, after_lib, after_load, after_context, after_warmup, after_free
  std::optional<uint64_t> rss_bytes;
  std::optional<uint64_t> pss_bytes;
  int64_t t_mono_ns = 0;
};

struct BenchRequest {
  uint32_t condition = 0;
  uint32_t seq = 0;
  uint32_t prompt_tokens = 0;
  uint32_t output_tokens = 0;
  double ttft_ms = 0;
  double e2e_ms = 0;
};

struct ConditionResult {
  BenchCondition condition;
  bool started = false;
  uint32_t n_ctx = 0, n_seq_max = 0;                   // the context it ran in
  nlohmann::json breakdown = nlohmann::json::array();  // engine-reported, when it started
  std::optional<uint64_t> start_rss_bytes;             // after its context was created
  bool finished = false;                               // every step ran
  double wall_ms = 0;  // prefill + generation, as the worker timed it
  std::vector<double> step_ms;
  double llama_prompt_ms = 0, llama_eval_ms = 0;  // llama.cpp's own timings
  std::optional<uint64_t> end_rss_bytes, end_pss_bytes;
  std::optional<uint64_t> peak_rss_bytes, peak_pss_bytes;  // sampled while it ran
  std::optional<uint64_t> peak_gpu_used_bytes;             // sum over GPUs, sampled
  int64_t start_mono_ns = 0, end_mono_ns = 0;
  std::vector<BenchRequest> requests;
};

struct BenchReport {
  std::string run_id;
  std::string run_dir;
  double started_unix_s = 0, ended_unix_s = 0;
  std::string status = "running";                      // completed, failed, crashed, interrupted
  std::string error;                                   // why it did not complete
  nlohmann::json lib = nlohmann::json::object();       // the "lib" event
  nlohmann::json model = nlohmann::json::object();     // the "model" event
  nlohmann::json context = nlohmann::json::object();   // the "context" event
  nlohmann::json breakdown = nlohmann::json::array();  // per buffer type, at the end
  std::vector<PhaseMemory> phases;
  std::vector<ConditionResult> conditions;
  std::optional<uint64_t> peak_rss_bytes, peak_pss_bytes;
  std::string memory_source = "none";  // "nvml" or "none"
  std::vector<std::string> warnings;
  std::vector<std::string> last_log_lines;  // the engine's last words when it failed
  int worker_exit = 0;                      // exit code, or 128 + signal
  std::map<std::string, std::string> files;
  // The comparison with the plan (--estimate-with's, or the run's own settings'), made once the
  // worker ended; null without one (bench_compare.hpp).
  nlohmann::json estimate_comparison;
};

// Called with the report after each worker event has been folded into it, and the event.
using BenchEventCallback = std::function<void(const BenchReport&, const nlohmann::json& event)>;

// Runs the bench described by `config` (defaults already resolved); `gpu` may be null;
// `on_event` (may be empty) sees its progress. Returns the report (also for a failed or
// interrupted run: its status says so); io error when the run folder cannot be created.
Expected<BenchReport> run_bench(const BenchConfig& config, gpu::MemorySource* gpu,
                                const std::string& memory_source_name,
                                const BenchEventCallback& on_event = {});

// The exit code for a finished report: 0 completed, 130 interrupted, 2 when the engine refused
// the model or settings, 1 otherwise.
int bench_exit_code(const BenchReport& report);

}  // namespace kvprof::bench
