// Which GPU memory source a measurement of a server uses: this machine's NVML only when the server
// runs here, or the monitoring of the node it runs on (a DCGM exporter or a Prometheus server), so
// a remote server never gets this machine's GPUs attributed to it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kvprof/gpu/memory_source.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::gpu {

enum class GpuSourceKind { automatic, nvml, none, dcgm, prometheus };

// A parsed --gpu-source value.
struct GpuSourceSpec {
  GpuSourceKind kind = GpuSourceKind::automatic;
  std::string url;  // dcgm / prometheus only
};

// Parses "auto", "nvml", "none", "dcgm=URL" or "prometheus=URL" (URL http:// or https://); a
// usage error naming the accepted forms otherwise.
Expected<GpuSourceSpec> parse_gpu_source(std::string_view text);

struct GpuSourceChoice {
  std::unique_ptr<MemorySource> source;  // null: GPU memory is not sampled
  std::string name = "none";             // "nvml", "dcgm", "prometheus" or "none"
  std::string note;     // why there is no source, or what the user should know; empty when none
  bool warn = false;    // print `note` as a warning
  bool remote = false;  // readings come at the monitoring's resolution (about a second)
};

// Opens the source `spec` names for a server at `endpoint` (empty: one this process starts
// here). `auto`: NVML when the endpoint is on this machine, otherwise no source and a warning.
// A remote source is asked for its GPUs once now, so a wrong URL or a selector that matches no
// GPU fails here (network / not_found errors) instead of during the run.
Expected<GpuSourceChoice> open_gpu_source(const GpuSourceSpec& spec, std::string_view selector,
                                          std::string_view endpoint, uint32_t min_refresh_ms);

}  // namespace kvprof::gpu
