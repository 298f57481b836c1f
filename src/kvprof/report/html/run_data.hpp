// One run folder (results/<run_id>/ of `profile` or `bench`) read back for plotting: its summary
// and manifest, the memory and gauge traces on one time axis (seconds since the first sample),
// the requests in flight, the capture points and phases, and one point per condition.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/results/run_summary.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::report::html {

// What a figure's numbers are, said on every chart.
enum class Nature { measured, engine_reported, estimated, simulated, reference };
const char* nature_name(Nature nature);

struct TimeSeries {
  std::string name;
  Nature nature = Nature::measured;
  std::vector<double> t_s;
  std::vector<double> value;
};

// A named moment with a value (capture points, bench phases).
struct Marker {
  std::string label;
  double t_s = 0;
  std::optional<double> bytes;
};

// A named stretch of time (conditions, startup phases).
struct Span {
  std::string label;
  double begin_s = 0, end_s = 0;
};

struct LatencyPercentiles {
  double p50 = 0, p90 = 0, p99 = 0;
  uint64_t n = 0;
};

// One condition of the grid.
struct ConditionPoint {
  std::string label;  // condition id as the run names it
  std::string group;  // the label without its concurrency: the series it belongs to
  uint32_t concurrency = 0;
  std::optional<uint32_t> input_len;     // prompt tokens of each request, when they are alike
  std::optional<double> peak_bytes;      // GPU used (sum over GPUs), or host RSS for a CPU bench
  std::optional<double> estimate_bytes;  // the planner's figure for the same memory
  std::optional<double> kv_peak_fraction;
  std::optional<double> tokens_per_s;  // output tokens of all requests / wall time
  LatencyPercentiles ttft_ms, itl_ms, e2e_ms;
};

struct Component {
  std::string name;  // weights, KV cache, activations, CUDA graphs, overhead
  std::optional<double> measured_bytes, estimated_bytes;
  std::string confidence;  // of the measured figure
  Nature measured_nature = Nature::measured;
};

struct RunData {
  std::filesystem::path dir;
  std::string run_id;
  std::string kind;  // "profile" or "bench"
  std::string model, engine, engine_version, device, kvprof_version, started_at;
  bool simulated = false;
  bool interrupted = false;
  std::string memory_kind = "GPU";  // "GPU" or "host": what peak_bytes measures
  Nature memory_nature = Nature::measured;
  std::optional<double> capacity_bytes;  // the GPUs' memory (sum), when known
  std::vector<TimeSeries> memory;        // per GPU used bytes, or the engine's host RSS
  std::optional<TimeSeries> host_rss;    // the server's host RSS beside GPU memory
  std::optional<TimeSeries> kv_usage;    // fraction 0..1, engine-reported
  std::optional<TimeSeries> in_flight;   // requests sent and not yet ended (steps)
  std::vector<Marker> captures;          // baseline, post-warmup, peak; bench phases
  std::vector<Span> phases;              // startup phases of a launched server
  std::vector<Span> windows;             // one per condition
  std::vector<ConditionPoint> points;
  std::vector<Component> components;
  std::string estimate_note;  // how the estimate was made
  // What the breakdown's measured side is: "measured", or for the simulator "simulated (checks
  // the measurement pipeline, not the planner)" (summary.json memory_breakdown.nature).
  std::string breakdown_nature = "measured";
  std::vector<std::string> warnings;
  double duration_s = 0;
  results::RunSummary summary;  // the run's typed summary (compare's and validate's view)
  nlohmann::json summary_json;  // summary.json as written: traces, phases, comparison rows
};

// Reads the run folder `dir` (opened by results::open_run_folder) with its traces: not_found when
// it has no summary.json, an input error when that is not a kvprof summary, an io error when a
// trace it names cannot be read.
Expected<RunData> load_run_data(const std::filesystem::path& dir);

// The condition's series: its label without the concurrency part ("in512_out32_c8_low" ->
// "in512_out32_low", "c4 p128" -> "p128").
std::string condition_group(const std::string& label);

// The input length a profile condition id names ("in128_out16_c4_low" -> 128); none otherwise.
std::optional<uint32_t> input_len_of(const std::string& label);

}  // namespace kvprof::report::html
