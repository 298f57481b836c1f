// Timeline: what a profile run saw, on one clock (steady_clock ns, as in the CSV traces):
// device memory samples, successful /metrics scrapes, and the phase and condition windows.
// Filled from the sampler and scraper threads; read once the run ends.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/gpu/sampler.hpp"
#include "kvprof/metrics/trace_csv.hpp"

namespace kvprof::profile {

struct MemoryPoint {
  int64_t t_mono_ns = 0;
  unsigned gpu = 0;
  uint64_t used_bytes = 0;
  std::optional<uint64_t> total_bytes;
};

// One reading of the server process's host memory.
struct HostPoint {
  int64_t t_mono_ns = 0;
  uint64_t rss_bytes = 0;
};

struct MetricsPoint {
  int64_t t_mono_ns = 0;
  metrics::MetricsSnapshot snapshot;
};

// A half-open time range [begin_ns, end_ns).
struct Window {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  [[nodiscard]] bool contains(int64_t t_ns) const { return t_ns >= begin_ns && t_ns < end_ns; }
};

class Timeline {
 public:
  // Adds a device reading (ignored when it has no used_bytes). Thread-safe.
  void add_memory(const gpu::DeviceSample& sample);
  // Adds a scrape (only successful ones are kept). Thread-safe.
  void add_metrics(const metrics::ScrapeRecord& record);
  // Adds points directly (tests, replays). Thread-safe.
  void add_memory_point(const MemoryPoint& point);
  void add_metrics_point(MetricsPoint point);
  // Adds a host reading of the server process (ignored without an RSS figure). Thread-safe.
  void add_host(int64_t t_mono_ns, const sys::HostMemory& memory);

  // Copies of what was added: memory in time order (points added afterwards, such as readings
  // filled from a source's history, take their place); metrics in arrival order.
  [[nodiscard]] std::vector<MemoryPoint> memory() const;
  [[nodiscard]] std::vector<MetricsPoint> metrics() const;
  [[nodiscard]] std::vector<HostPoint> host() const;  // in arrival (time) order

 private:
  mutable std::mutex m_mutex;
  std::vector<MemoryPoint> m_memory;
  std::vector<MetricsPoint> m_metrics;
  std::vector<HostPoint> m_host;
};

// Memory of one GPU over a window.
struct GpuWindowStats {
  unsigned gpu = 0;
  uint64_t n_samples = 0;
  uint64_t min_used_bytes = 0;
  uint64_t max_used_bytes = 0;
  uint64_t mean_used_bytes = 0;  // rounded
  uint64_t last_used_bytes = 0;
  std::optional<uint64_t> total_bytes;
};

// Per-GPU statistics of the samples in `window`, ordered by GPU; GPUs with no sample there are
// left out.
std::vector<GpuWindowStats> memory_in(const std::vector<MemoryPoint>& points, Window window);

// The largest RSS of the host readings in `window`; none without a reading there.
std::optional<uint64_t> peak_rss_in(const std::vector<HostPoint>& points, Window window);

// The sample with the most RSS in `window` (the first of equals); none without a sample there.
std::optional<HostPoint> peak_rss_point(const std::vector<HostPoint>& points, Window window);

// The scraped server state over a window.
struct MetricsWindowStats {
  uint64_t n_scrapes = 0;
  std::optional<double> peak_kv_cache_usage;                    // 0..1
  metrics::KvSource kv_cache_source = metrics::KvSource::none;  // of the usage figures
  std::optional<double> mean_kv_cache_usage;
  std::optional<double> peak_kv_cache_used_tokens;
  std::optional<double> peak_num_requests_running;
  std::optional<double> peak_num_requests_waiting;
  // Counter increase over the window, from the last scrape before it (or its first) to its last.
  std::optional<double> preemptions;
  std::optional<uint64_t> num_gpu_blocks;  // the latest reported in the window
  std::optional<uint64_t> block_size_tokens;
  std::optional<uint64_t> kv_cache_capacity_tokens;
};

// Statistics of the scrapes in `window` (points in time order).
MetricsWindowStats metrics_in(const std::vector<MetricsPoint>& points, Window window);

}  // namespace kvprof::profile
