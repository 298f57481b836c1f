// llama.cpp, as the engine registry (engines/registry.hpp) calls it: its memory plan (per device,
// buffers in buffers.hpp), the readers of its startup log, of its /metrics and of its server's
// flags.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/enginelog/line_reader.hpp"
#include "kvprof/engines/llamacpp/buffers.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/estimate/launch_reading.hpp"
#include "kvprof/metrics/prometheus.hpp"
#include "kvprof/metrics/snapshot.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::engines {

// llama.cpp's buffers for `input`, per device, and the host RAM a CPU deployment needs.
Expected<estimate::Estimate> estimate_llamacpp(const estimate::EstimateInput& input);

// The model llama.cpp loads for `input`: the model itself, or with -q MIX (a llama-quantize mix)
// the GGUF that mix makes of it; a usage error for a mix of an already quantized model.
Expected<model::ModelSpec> llamacpp_model(const estimate::EstimateInput& input);

// The llama.cpp settings `settings` name (-c 4096 when no context is given), as
// estimate_llamacpp plans them; usage error for a cache type llama.cpp lacks (fp8).
Expected<LlamaCppSettings> llamacpp_settings(const estimate::EngineSettings& settings);

// The buffer lines llama.cpp logs at startup for plan `p` of `s` (its weights, output, KV and
// compute buffers per device, the KV cache's size line), in the words of s.release.
std::vector<std::string> llamacpp_log_lines(const LlamaCppPlan& p, const LlamaCppSettings& s,
                                            uint32_t n_layer);

// The reader of llama.cpp's startup lines: model, KV, compute and output buffers per device,
// settings, model facts, the build and the memory breakdown table.
enginelog::LineReader llamacpp_log_reader();

// Reads a llama-server (or `kvprof serve`) command, `words` from its program on, into `out`;
// false, `out` untouched, for any other program.
bool read_llamacpp_command(std::span<const std::string> words, estimate::LaunchReading& out);

// llama-server's gauges and counters into `snapshot`.
void read_llamacpp_metrics(const metrics::Exposition& exposition,
                           metrics::MetricsSnapshot& snapshot);

}  // namespace kvprof::engines
