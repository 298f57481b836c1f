// The measured memory breakdown of a profile run (seed 003's components, each with a confidence)
// and its comparison with an estimate (seed 001's compare-estimates, done live).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/estimate/result.hpp"
#include "kvprof/profile/timeline.hpp"

namespace kvprof::profile {

enum class Confidence { none, low, medium, high };
std::string_view confidence_name(Confidence c);  // "none", "low", "medium", "high"

// One of seed 003's three capture points over the GPUs sampled.
struct CapturePoint {
  std::string name;  // "baseline", "post_warmup", "peak"
  Window window;
  std::vector<GpuWindowStats> per_gpu;
  // Per GPU, the figure of this point: the mean over the window (baseline, post_warmup) or the
  // max (peak); then across GPUs: their sum, max, mean and population standard deviation.
  std::vector<uint64_t> used_bytes;
  uint64_t sum_bytes = 0;
  uint64_t max_bytes = 0;
  double mean_bytes = 0;
  double stddev_bytes = 0;
  [[nodiscard]] bool empty() const { return per_gpu.empty(); }
};

// The capture point `name` from the samples in `window`; `use_max` picks the per-GPU max
// (peak) instead of the mean.
CapturePoint capture_point(std::string name, const std::vector<MemoryPoint>& points, Window window,
                           bool use_max);

struct Component {
  // Absent when it could not be measured; below zero only for overhead, where the parts it is
  // the residual of exceed the total (the parts always add up to the total shown).
  std::optional<int64_t> bytes;
  Confidence confidence = Confidence::none;
  std::string method;  // how it was obtained, one line
};

// Seed 003's breakdown of the busiest GPU's peak, or of a server on the CPU's peak RSS.
struct MeasuredBreakdown {
  std::string memory = "gpu";  // "gpu" (the busiest GPU's peak) or "host" (the server's RSS)
  unsigned gpu = 0;
  uint64_t total_measured_bytes = 0;  // peak used on that GPU, or the server's peak RSS
  Component weights, kv_cache, activations, overhead;
  Confidence overall = Confidence::none;
};

// What the breakdown is derived from, all for the busiest GPU.
struct BreakdownInput {
  unsigned gpu = 0;
  std::optional<uint64_t> baseline_bytes;        // before any load
  std::optional<uint64_t> post_warmup_bytes;     // after a few small requests
  std::optional<uint64_t> peak_bytes;            // the most used during the grid
  std::optional<uint64_t> num_gpu_blocks;        // the server's KV block count (/metrics)
  std::optional<uint64_t> kv_bytes_per_block;    // per GPU, from the model (estimate)
  std::optional<uint64_t> fixed_overhead_bytes;  // estimated CUDA context + non-torch + graphs
  // An on-demand KV pool: bytes the pool grows per unit of kv_cache_usage (fit_kv_growth).
  std::optional<double> kv_growth_bytes_per_usage;
  std::optional<double> peak_kv_cache_usage;  // 0..1 during the grid
  std::optional<double> post_warmup_kv_cache_usage;
};

// The breakdown: KV pool from the server's block count x the model's bytes per block (high), or
// from the memory's growth with the KV gauge (medium); weights from the baseline less the
// preallocated KV pool and the estimated fixed overhead; activations from peak - post-warmup
// less KV growth; overhead the residual. Absent inputs lower the confidence.
MeasuredBreakdown measure_breakdown(const BreakdownInput& input);

// The breakdown of a server that runs on the CPU (no GPU memory sampled): its peak RSS split into
// the buffers the engine states (`engine_reported`, engine_reported_json in startup.hpp) — weights,
// KV cache and compute buffers as activations, each reserved, high confidence — and overhead, the
// residual (below zero where untouched reserved pages keep the RSS under the parts). None when
// the engine states no weights or the RSS was not sampled.
std::optional<MeasuredBreakdown> host_breakdown(const nlohmann::json& engine_reported,
                                                std::optional<uint64_t> peak_rss_bytes);

// A least-squares fit of used memory against the KV gauge over the scrapes in `window` (memory
// sample nearest before each scrape): bytes per unit of kv_cache_usage, when the pool visibly
// grows with use (slope > 0, r^2 >= 0.8, usage spread >= 0.05); nullopt for a preallocated pool.
std::optional<double> fit_kv_growth(const std::vector<MemoryPoint>& memory,
                                    const std::vector<MetricsPoint>& metrics, unsigned gpu,
                                    Window window);

// One measured-vs-estimated figure.
struct ComparisonRow {
  std::string name;  // "weights", "kv_cache", ..., "num_gpu_blocks", "kv_cache_tokens"
  std::string unit;  // "bytes", "blocks", "tokens"
  std::optional<double> measured;
  std::optional<double> estimated;
  std::optional<double> error_pct;  // (estimated - measured) / measured x 100
  Confidence measured_confidence = Confidence::none;
  // Where `measured` comes from: "samples" (the memory sampled), or the engine's own statement
  // ("server.log", "/props") or "host RSS" where no GPU was sampled.
  std::string measured_source = "samples";
};

// Measured vs estimated per component (weights, kv_cache, activations, overhead, total) and the
// engine's own figures (num_gpu_blocks, kv_cache_tokens) when the server reports them.
std::vector<ComparisonRow> compare_with_estimate(const MeasuredBreakdown& measured,
                                                 const MetricsWindowStats& server,
                                                 const estimate::Estimate& est);

// Where no memory was sampled to break down (a server on the CPU), the buffers the engine states
// (`engine_reported`: weights, KV cache, compute) are compared with those the plan says it will
// log (`planned`, the same reading of the plan's log lines; the activations row holds the
// compute buffers), and the plan's total with the server's peak RSS. Rows already measured are
// left as they are.
void compare_with_engine_figures(std::vector<ComparisonRow>& rows,
                                 const nlohmann::json& engine_reported,
                                 const nlohmann::json& planned,
                                 std::optional<uint64_t> peak_rss_bytes);

}  // namespace kvprof::profile
