// GPU memory from a Prometheus server's HTTP API: instant queries of the DCGM framebuffer series
// it scrapes from the exporters of every node, narrowed by a label selector (e.g.
// {Hostname="node1"}), so a deployment is measured from the monitoring it already has.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/gpu/remote_source.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::gpu {

// The PromQL instant query kvprof sends: the DCGM_FI_DEV_FB_* series matching `selector`.
std::string dcgm_memory_query(const std::vector<LabelMatcher>& selector);

// Parses the JSON answer of /api/v1/query (resultType "vector", at most 4,096 series) into one
// reading per GPU; Prometheus's own error ({"status":"error",...}) and any malformed answer are
// input errors carrying its message.
Expected<std::vector<RemoteGpuReading>> parse_prometheus_query_answer(std::string_view json_text);

// Parses the JSON answer of /api/v1/query_range (resultType "matrix", at most 4,096 series and
// 1,000,000 points in all) into every GPU's readings per instant, in time order; errors as for
// parse_prometheus_query_answer.
Expected<std::vector<TimedRemoteReadings>> parse_prometheus_range_answer(
    std::string_view json_text);

// The query_range URL path and parameters for [from_wall_ms, to_wall_ms] every step_ms
// ("/api/v1/query_range?query=...&start=1700000000.000&end=...&step=1.000").
std::string prometheus_range_target(const std::vector<LabelMatcher>& selector, int64_t from_wall_ms,
                                    int64_t to_wall_ms, uint32_t step_ms);

// A source querying the Prometheus server at `base_url` (http://prom:9090) once per
// `min_refresh_ms` at most, whose history (query_range, at most 10,000 steps a request) fills
// the gaps a failed query leaves.
std::unique_ptr<RemoteSource> make_prometheus_source(const std::string& base_url,
                                                     std::vector<LabelMatcher> selector,
                                                     uint32_t min_refresh_ms);

}  // namespace kvprof::gpu
