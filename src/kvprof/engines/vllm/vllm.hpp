// vLLM, as the engine registry (engines/registry.hpp) calls it: its memory plan, the reader of
// its startup log and the reader of its /metrics. Its releases are in releases.hpp, the budget
// the plan and the sweep share in budget.hpp.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "kvprof/enginelog/line_reader.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/estimate/launch_reading.hpp"
#include "kvprof/metrics/prometheus.hpp"
#include "kvprof/metrics/snapshot.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::engines {

// vLLM's own memory budget for `input`, by the rules of the release its settings name.
Expected<estimate::Estimate> estimate_vllm(const estimate::EstimateInput& input);

// The reader of vLLM's startup lines: weights, profile run, KV cache, CUDA graphs, its version.
enginelog::LineReader vllm_log_reader();

// vLLM's gauges and counters (both spellings of the families a release renamed) into `snapshot`.
void read_vllm_metrics(const metrics::Exposition& exposition, metrics::MetricsSnapshot& snapshot);

// Reads a `vllm serve` (or the api_server module) command, `words` from its program on, into `out`;
// false, `out` untouched, for any other program.
bool read_vllm_command(std::span<const std::string> words, estimate::LaunchReading& out);

}  // namespace kvprof::engines
