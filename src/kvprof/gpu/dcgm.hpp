// GPU memory from a DCGM exporter (NVIDIA's dcgm-exporter, default port 9400): its /metrics
// text is Prometheus exposition whose DCGM_FI_DEV_FB_* gauges give each GPU's framebuffer in MiB,
// labelled gpu, UUID, device, modelName and Hostname.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/gpu/remote_source.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::gpu {

// Parses a DCGM exporter's /metrics `text` (malformed lines skipped, at most 100,000 samples) into
// one reading per GPU whose labels match `selector`; an input error when the text is not
// exposition at all.
Expected<std::vector<RemoteGpuReading>> parse_dcgm_metrics(
    std::string_view text, const std::vector<LabelMatcher>& selector = {});

// A source polling the exporter at `url` (its /metrics, e.g. http://node1:9400/metrics), one GET
// per `min_refresh_ms` at most.
std::unique_ptr<RemoteSource> make_dcgm_source(const std::string& url,
                                               std::vector<LabelMatcher> selector,
                                               uint32_t min_refresh_ms);

}  // namespace kvprof::gpu
