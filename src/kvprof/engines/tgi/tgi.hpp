// TGI (text-generation-inference), as the engine registry (engines/registry.hpp) calls it: its
// memory plan, the reader of its startup log, of its /metrics and of its launcher's command.
// Its releases are in releases.hpp.
#pragma once

#include <span>
#include <string>

#include "kvprof/enginelog/line_reader.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/estimate/launch_reading.hpp"
#include "kvprof/metrics/prometheus.hpp"
#include "kvprof/metrics/snapshot.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::engines {

// TGI's warmup rule for `input` with the defaults of the release its settings name.
Expected<estimate::Estimate> estimate_tgi(const estimate::EstimateInput& input);

// The reader of TGI's startup lines: the launcher's defaults, the KV blocks and the router's
// "Setting max batch total tokens to N".
enginelog::LineReader tgi_log_reader();

// TGI's queue and batch gauges into `snapshot`.
void read_tgi_metrics(const metrics::Exposition& exposition, metrics::MetricsSnapshot& snapshot);

// Reads a `text-generation-launcher` command (or a `docker run` of TGI's image, whose entry point
// it is), `words` from its program on, into `out`; false, `out` untouched, for any other program.
bool read_tgi_command(std::span<const std::string> words, estimate::LaunchReading& out);

}  // namespace kvprof::engines
