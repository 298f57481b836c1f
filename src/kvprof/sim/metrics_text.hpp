// The simulator's /metrics page: Prometheus text format with vLLM V1's metric names, labels
// (engine, model_name; sorted as prometheus_client writes them) and TTFT buckets, driven by the
// engine's real block and request state.
#pragma once

#include <string>

#include "kvprof/sim/engine.hpp"
#include "kvprof/sim/sim_config.hpp"

namespace kvprof::sim {

// Renders the metrics page for `stats` of an engine configured by `config`.
std::string render_metrics(const SimConfig& config, const EngineStats& stats);

// Renders what NVIDIA's DCGM exporter would publish for the simulated GPU (its framebuffer
// gauges in MiB, DCGM's labels, config.dcgm_hostname as Hostname).
std::string render_dcgm_metrics(const SimConfig& config, const EngineStats& stats);

// A number as prometheus_client writes it: "3.0", "0.25", "+Inf".
std::string prom_number(double value);

}  // namespace kvprof::sim
