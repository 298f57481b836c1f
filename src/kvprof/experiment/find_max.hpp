// `kvprof find-max`: the largest concurrency a server runs at one (input, output) length with no
// errors, no preemption, no request queued behind another, memory under a limit and the latency
// SLOs met. The search starts from the estimate's answer, brackets it with one step of 25%, then
// bisects: at most floor(log2(range)) + 3 steps, where a grid over the range takes one step per
// concurrency. Each step is one trial (a profile run of one wave of `concurrency` requests), kept
// in its own run folder.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/util/error.hpp"

namespace kvprof::experiment {

struct FindMaxLimits {
  uint32_t input_len = 0;
  uint32_t output_len = 0;
  std::optional<double> slo_ttft_ms;      // p99 time to first token
  std::optional<double> slo_itl_ms;       // p99 inter-token latency
  std::optional<double> max_memory_frac;  // peak used / total on the busiest GPU
  uint32_t min_concurrency = 1;
  uint32_t max_concurrency = 256;
  std::optional<uint32_t> start;  // the estimate's answer; none: the middle of the range
  std::string start_source;       // how the start was chosen, for the report
};

// What one trial measured.
struct TrialOutcome {
  uint32_t concurrency = 0;
  uint64_t n_requests = 0, n_ok = 0, n_errors = 0;
  std::string first_error;
  std::optional<double> preemptions;   // the server's counter over the trial
  uint32_t queued_requests = 0;        // first token after another request had ended
  std::optional<double> peak_running;  // the server's gauges
  std::optional<double> peak_waiting;
  std::optional<double> peak_kv_cache_usage;  // 0..1
  std::optional<double> ttft_p99_ms, itl_p99_ms;
  std::optional<double> memory_frac;  // peak used / total of the busiest GPU
  std::optional<uint64_t> num_gpu_blocks, block_size_tokens;  // as the server reports them
  std::optional<uint64_t> kv_capacity_tokens;  // the KV cache's tokens (llama.cpp: its cells)
  std::string run_dir;
  bool interrupted = false;  // the run was stopped before the trial ended: it is not a result
};

struct TrialVerdict {
  bool pass = false;
  std::string why;  // one line: every limit that failed, or the margins of a pass
};

// Judges `o` against `limits`.
TrialVerdict judge_trial(const TrialOutcome& o, const FindMaxLimits& limits);

// Runs one trial at `concurrency`; `step` counts from 1. An error ends the search.
using Trial = std::function<Expected<TrialOutcome>(uint32_t concurrency, uint32_t step)>;

struct FindMaxStep {
  uint32_t step = 0;
  std::string phase;  // "start", "bracket", "bisect"
  TrialOutcome outcome;
  TrialVerdict verdict;
  double wall_s = 0;
};

struct FindMaxResult {
  FindMaxLimits limits;
  std::vector<FindMaxStep> steps;
  uint32_t step_bound = 0;             // floor(log2(range)) + 3
  std::optional<uint32_t> answer;      // none: even min_concurrency fails
  std::optional<uint32_t> first_fail;  // the smallest failing concurrency found
  bool at_range_limit = false;         // max_concurrency passed: the limit may lie above it
  bool interrupted = false;
  std::string margin;  // one line
  double wall_s = 0;
};

// floor(log2(max - min + 1)) + 3.
uint32_t find_max_step_bound(uint32_t min_concurrency, uint32_t max_concurrency);

// Searches [min, max] with `trial` (assumed monotone: what fails at c fails above it); `on_step`
// sees each step as it ends; `should_stop` ends the search early (result.interrupted), and so
// does a trial that comes back interrupted, which is kept as a step but judged neither way. Errors:
// usage for an empty range or bad lengths, or the trial's error.
Expected<FindMaxResult> find_max(const FindMaxLimits& limits, const Trial& trial,
                                 const std::function<void(const FindMaxStep&)>& on_step,
                                 const std::function<bool()>& should_stop);

nlohmann::json find_max_json(const FindMaxResult& result);
std::string find_max_step_text(const FindMaxStep& step);
std::string find_max_text(const FindMaxResult& result);

}  // namespace kvprof::experiment
