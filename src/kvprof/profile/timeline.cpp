// Timeline collection and window statistics (see timeline.hpp).
#include "kvprof/profile/timeline.hpp"

#include <algorithm>
#include <cmath>
#include <map>

namespace kvprof::profile {

void Timeline::add_memory(const gpu::DeviceSample& sample) {
  if (!sample.memory.used_bytes) return;
  add_memory_point(MemoryPoint{sample.t_mono_ns, sample.memory.gpu, *sample.memory.used_bytes,
                               sample.memory.total_bytes});
}

void Timeline::add_metrics(const metrics::ScrapeRecord& record) {
  if (record.status != metrics::ScrapeStatus::ok) return;
  add_metrics_point(MetricsPoint{record.mono_ns, record.snapshot});
}

void Timeline::add_memory_point(const MemoryPoint& point) {
  std::lock_guard lock(m_mutex);
  m_memory.push_back(point);
}

void Timeline::add_metrics_point(MetricsPoint point) {
  std::lock_guard lock(m_mutex);
  m_metrics.push_back(std::move(point));
}

void Timeline::add_host(int64_t t_mono_ns, const sys::HostMemory& memory) {
  if (!memory.rss_bytes) return;
  std::lock_guard lock(m_mutex);
  m_host.push_back({t_mono_ns, *memory.rss_bytes});
}

std::vector<HostPoint> Timeline::host() const {
  std::lock_guard lock(m_mutex);
  return m_host;
}

std::optional<uint64_t> peak_rss_in(const std::vector<HostPoint>& points, Window window) {
  std::optional<uint64_t> peak;
  for (const auto& p : points) {
    if (window.contains(p.t_mono_ns)) peak = std::max(peak.value_or(0), p.rss_bytes);
  }
  return peak;
}

std::optional<HostPoint> peak_rss_point(const std::vector<HostPoint>& points, Window window) {
  std::optional<HostPoint> peak;
  for (const auto& p : points) {
    if (window.contains(p.t_mono_ns) && (!peak || p.rss_bytes > peak->rss_bytes)) peak = p;
  }
  return peak;
}

std::vector<MemoryPoint> Timeline::memory() const {
  std::vector<MemoryPoint> out;
  {
    std::lock_guard lock(m_mutex);
    out = m_memory;
  }
  // Readings filled in afterwards from a source's history arrive out of order.
  const auto earlier = [](const auto& a, const auto& b) { return a.t_mono_ns < b.t_mono_ns; };
  if (!std::is_sorted(out.begin(), out.end(), earlier)) {
    std::stable_sort(out.begin(), out.end(), earlier);
  }
  return out;
}

std::vector<MetricsPoint> Timeline::metrics() const {
  std::lock_guard lock(m_mutex);
  return m_metrics;
}

std::vector<GpuWindowStats> memory_in(const std::vector<MemoryPoint>& points, Window window) {
  struct Acc {
    GpuWindowStats stats;
    long double sum = 0;
  };
  std::map<unsigned, Acc> by_gpu;
  for (const auto& p : points) {
    if (!window.contains(p.t_mono_ns)) continue;
    auto& acc = by_gpu[p.gpu];
    auto& s = acc.stats;
    if (s.n_samples == 0) {
      s.gpu = p.gpu;
      s.min_used_bytes = p.used_bytes;
      s.max_used_bytes = p.used_bytes;
    }
    ++s.n_samples;
    s.min_used_bytes = std::min(s.min_used_bytes, p.used_bytes);
    s.max_used_bytes = std::max(s.max_used_bytes, p.used_bytes);
    s.last_used_bytes = p.used_bytes;
    if (p.total_bytes) s.total_bytes = p.total_bytes;
    acc.sum += static_cast<long double>(p.used_bytes);
  }
  std::vector<GpuWindowStats> out;
  for (auto& [gpu, acc] : by_gpu) {
    acc.stats.mean_used_bytes = static_cast<uint64_t>(
        std::llround(acc.sum / static_cast<long double>(acc.stats.n_samples)));
    out.push_back(acc.stats);
  }
  return out;
}

namespace {

void raise(std::optional<double>& peak, const std::optional<double>& value) {
  if (value && std::isfinite(*value) && (!peak || *value > *peak)) peak = value;
}

}  // namespace

MetricsWindowStats metrics_in(const std::vector<MetricsPoint>& points, Window window) {
  MetricsWindowStats out;
  std::optional<double> preempt_before, preempt_first, preempt_last;
  double usage_sum = 0;
  uint64_t usage_n = 0;
  for (const auto& p : points) {
    const auto& s = p.snapshot;
    if (p.t_mono_ns < window.begin_ns) {
      if (s.num_preemptions_total) preempt_before = s.num_preemptions_total;
      continue;
    }
    if (p.t_mono_ns >= window.end_ns) continue;
    ++out.n_scrapes;
    raise(out.peak_kv_cache_usage, s.kv_cache_usage);
    if (s.kv_cache_usage && std::isfinite(*s.kv_cache_usage)) {
      out.kv_cache_source = s.kv_cache_source;
      usage_sum += *s.kv_cache_usage;
      ++usage_n;
    }
    raise(out.peak_kv_cache_used_tokens, s.kv_cache_used_tokens);
    raise(out.peak_num_requests_running, s.num_requests_running);
    raise(out.peak_num_requests_waiting, s.num_requests_waiting);
    if (s.num_preemptions_total) {
      if (!preempt_first) preempt_first = s.num_preemptions_total;
      preempt_last = s.num_preemptions_total;
    }
    if (s.num_gpu_blocks) out.num_gpu_blocks = s.num_gpu_blocks;
    if (s.block_size_tokens) out.block_size_tokens = s.block_size_tokens;
    if (s.kv_cache_capacity_tokens) out.kv_cache_capacity_tokens = s.kv_cache_capacity_tokens;
  }
  if (usage_n > 0) out.mean_kv_cache_usage = usage_sum / static_cast<double>(usage_n);
  if (preempt_last) {
    const double from = preempt_before.value_or(*preempt_first);
    out.preemptions = std::max(0.0, *preempt_last - from);
  }
  return out;
}

}  // namespace kvprof::profile
