// The layout that `profile` and `bench` summaries share, on the writing side: the keys and the
// documented aliases of what both write (versions, the memory at three capture points, the
// measured breakdown, the run's latency and request totals, each condition's figures). A field
// both commands write is written here once, so the two summary.json files cannot drift apart;
// run_summary.cpp reads them back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kvprof::results {

// The predecessor's schema string that its `jq -e '.schema_version == "2.0"'` check looks for.
inline constexpr const char* k_layout_version = "2.0";

// One part of the measured breakdown: bytes (below zero only for overhead, a residual), how sure
// and how it was obtained.
struct PartFigures {
  std::optional<int64_t> bytes;
  std::string confidence = "none";  // "none", "low", "medium", "high"
  std::string method;
};

// The measured breakdown: its parts add up to total_measured_bytes.
struct BreakdownFigures {
  std::string memory = "gpu";   // "gpu" (the busiest GPU's peak) or "host" (a process's RSS)
  std::optional<unsigned> gpu;  // that GPU, for "gpu"
  std::optional<uint64_t> total_measured_bytes;
  PartFigures weights, kv_cache, activations, overhead;
  std::string overall_confidence = "none";
};

// Sets schema_version ("2.0"), schema_version_number (`number`, kvprof's integer version of the
// layout), profiler_version ("2.0", the predecessor's) and kvprof_version in `summary`.
void add_versions(nlohmann::json& summary, int number);

// memory_breakdown: `_bytes` fields, their `_gib` twins and the predecessor's `_gb` aliases,
// confidence_levels and components.
nlohmann::json breakdown_json(const BreakdownFigures& b);

// One capture point's total: total_bytes, total_gib and the alias total_gb.
nlohmann::json capture_total_json(uint64_t total_bytes);

// memory_increase_{bytes,gib,gb} of memory_measurements: peak less baseline, null when either is
// unknown.
void add_memory_increase(nlohmann::json& measurements, std::optional<uint64_t> baseline_bytes,
                         std::optional<uint64_t> peak_bytes);

// The run's latency_stats: mean end-to-end latency of the requests that completed and output
// tokens per second of the time the conditions ran.
nlohmann::json latency_totals_json(double e2e_sum_ms, uint64_t n_ok, uint64_t output_tokens,
                                   double duration_s);

}  // namespace kvprof::results
