// SGLang, as the engine registry (engines/registry.hpp) calls it: its memory plan, the reader of
// its startup log and the reader of its /metrics. Its releases are in releases.hpp.
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

// SGLang's KV pool rule for `input` with the defaults of the release its settings name.
Expected<estimate::Estimate> estimate_sglang(const estimate::EstimateInput& input);

// The reader of SGLang's startup lines: weights, KV pool, CUDA graph batch sizes.
enginelog::LineReader sglang_log_reader();

// SGLang's gauges and counters into `snapshot`.
void read_sglang_metrics(const metrics::Exposition& exposition, metrics::MetricsSnapshot& snapshot);

// Reads a `python -m sglang.launch_server` (or `sglang serve`) command, `words` from its program
// on, into `out`; false, `out` untouched, for any other program.
bool read_sglang_command(std::span<const std::string> words, estimate::LaunchReading& out);

}  // namespace kvprof::engines
