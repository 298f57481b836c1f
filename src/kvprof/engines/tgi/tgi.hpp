// TGI (text-generation-inference), as the engine registry (engines/registry.hpp) calls it: the
// reader of its /metrics. kvprof does not plan it or read its log yet.
#pragma once

#include "kvprof/metrics/prometheus.hpp"
#include "kvprof/metrics/snapshot.hpp"

namespace kvprof::engines {

// TGI's queue and batch gauges into `snapshot`.
void read_tgi_metrics(const metrics::Exposition& exposition, metrics::MetricsSnapshot& snapshot);

}  // namespace kvprof::engines
