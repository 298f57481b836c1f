// What `kvprof bench` writes: summary.json (the same layout as profile's where the meaning is
// the same: memory_breakdown with a confidence per component, per-condition latency and
// throughput), manifest.json, request_trace.csv and the terminal table.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "kvprof/bench/bench_run.hpp"

namespace kvprof::bench {

inline constexpr int k_bench_schema_version = 2;

// Sums of the engine-reported buffers of a breakdown array (see worker events).
struct EngineBuffers {
  uint64_t model_bytes = 0, context_bytes = 0, compute_bytes = 0;
  bool reported = false;  // the engine gave a breakdown
};
EngineBuffers sum_buffers(const nlohmann::json& breakdown);

// Whether the worker's "lib" event lists a GPU device.
bool lib_has_gpu(const nlohmann::json& lib);

nlohmann::json summary_json(const BenchConfig& config, const BenchReport& report);
nlohmann::json manifest_json(const BenchConfig& config, const BenchReport& report);

// One row per request: condition, seq, prompt/output tokens, TTFT and E2E (ms); an io error.
Expected<void> write_request_trace(const std::filesystem::path& path, const BenchReport& report);

// The per-condition table, the memory at each phase and the breakdown.
std::string summary_text(const BenchConfig& config, const BenchReport& report);

}  // namespace kvprof::bench
