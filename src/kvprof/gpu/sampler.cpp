// Sampler: the device/process thread, the host thread, CSV rows and running peaks.
#include "kvprof/gpu/sampler.hpp"
#include "kvprof/util/clock.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace kvprof::gpu {
namespace {

using Clock = std::chrono::steady_clock;

void append_optional(std::string& row, const std::optional<uint64_t>& value) {
  row += ',';
  if (value) fmt::format_to(std::back_inserter(row), "{}", *value);
}

}  // namespace

std::string device_trace_row(const DeviceSample& s) {
  std::string row = fmt::format("{},{},device,{},", s.t_mono_ns, s.t_wall_ms, s.memory.gpu);
  append_optional(row, s.memory.total_bytes);
  append_optional(row, s.memory.reserved_bytes);
  append_optional(row, s.memory.free_bytes);
  append_optional(row, s.memory.used_bytes);
  return row + '\n';
}

Sampler::Sampler(MemorySource* source, SamplerOptions options)
    : m_source(source), m_options(std::move(options)) {}

Sampler::~Sampler() {
  (void)stop();
}

Expected<void> Sampler::start() {
  if (m_started) return fail(ErrorKind::internal, "sampler started twice");
  m_started_mono_ns = monotonic_now_ns();
  const bool gpu_sampling = !m_options.gpu_trace_path.empty();
  if (gpu_sampling && m_source == nullptr) {
    return fail(ErrorKind::internal, "GPU trace requested without a memory source");
  }
  if (!gpu_sampling && !m_options.host_pid) {
    return fail(ErrorKind::usage, "nothing to sample: no GPU trace and no host process");
  }
  if (m_options.interval_ms < 1 || m_options.host_interval_ms < 1) {
    return fail(ErrorKind::usage, "sampling intervals must be at least 1 ms");
  }
  if (m_options.host_pid && m_options.host_trace_path.empty()) {
    return fail(ErrorKind::usage, "a host process to sample needs a host trace path");
  }
  if (gpu_sampling) {
    auto count = m_source->device_count();
    if (!count) return std::unexpected(count.error());
    if (*count == 0) return fail(ErrorKind::driver, "the NVIDIA driver reports no GPUs");
    if (m_options.gpus.empty()) {
      for (unsigned i = 0; i < *count; ++i)
        m_options.gpus.push_back(i);
    }
    for (unsigned gpu : m_options.gpus) {
      if (gpu >= *count) {
        return fail(ErrorKind::usage,
                    fmt::format("no GPU {}: this machine has {} (0..{})", gpu, *count, *count - 1));
      }
    }
    std::sort(m_options.gpus.begin(), m_options.gpus.end());
    m_options.gpus.erase(std::unique(m_options.gpus.begin(), m_options.gpus.end()),
                         m_options.gpus.end());
    auto file = TraceFile::create(m_options.gpu_trace_path, k_gpu_trace_header);
    if (!file) return std::unexpected(file.error());
    m_gpu_trace = std::move(*file);
    for (unsigned gpu : m_options.gpus)
      m_peaks[gpu].gpu = gpu;
  }
  if (m_options.host_pid) {
    if (*m_options.host_pid <= 0 || !m_proc.exists(*m_options.host_pid)) {
      return fail(ErrorKind::not_found,
                  fmt::format("process {} does not exist", *m_options.host_pid));
    }
    auto file = TraceFile::create(m_options.host_trace_path, k_host_trace_header);
    if (!file) return std::unexpected(file.error());
    m_host_trace = std::move(*file);
    m_host.emplace();
    m_host->pid = *m_options.host_pid;
    m_host->process_group = m_options.host_pid_is_group;
  }
  m_started = true;
  if (gpu_sampling) m_device_thread = std::thread([this] { device_loop(); });
  if (m_options.host_pid) m_host_thread = std::thread([this] { host_loop(); });
  return {};
}

Expected<void> Sampler::stop() {
  {
    std::lock_guard lock(m_wait_mutex);
    m_stop = true;
  }
  m_wait_cv.notify_all();
  if (m_device_thread.joinable()) m_device_thread.join();
  if (m_host_thread.joinable()) m_host_thread.join();
  m_gpu_trace.close();
  m_host_trace.close();
  std::lock_guard lock(m_state_mutex);
  if (m_fatal) return std::unexpected(*m_fatal);
  return {};
}

bool Sampler::wait_until_due(Clock::time_point due) {
  std::unique_lock lock(m_wait_mutex);
  return m_wait_cv.wait_until(lock, due, [this] { return m_stop; });
}

void Sampler::record_failure(const Error& error) {
  std::lock_guard lock(m_state_mutex);
  ++m_stats.failed_queries;
  m_stats.last_query_error = error.message;
}

void Sampler::record_fatal(const Error& error) {
  {
    std::lock_guard lock(m_state_mutex);
    if (!m_fatal) m_fatal = error;
  }
  m_failed = true;
}

bool Sampler::sample_devices_once() {
  std::string rows;
  std::vector<DeviceSample> taken;
  taken.reserve(m_options.gpus.size());
  for (unsigned gpu : m_options.gpus) {
    DeviceSample s;
    s.t_mono_ns = monotonic_now_ns();
    s.t_wall_ms = unix_now_ms();
    auto memory = m_source->sample_device(gpu);
    if (!memory) {
      record_failure(memory.error());
      continue;
    }
    s.memory = *memory;
    s.memory.gpu = gpu;
    rows += device_trace_row(s);
    taken.push_back(s);
  }
  if (!rows.empty()) {
    if (auto ok = m_gpu_trace.append(rows); !ok) {
      record_fatal(ok.error());
      return false;
    }
  }
  {
    std::lock_guard lock(m_state_mutex);
    m_stats.device_rows += taken.size();
    for (const DeviceSample& s : taken) {
      GpuPeak& peak = m_peaks[s.memory.gpu];
      peak.latest = s;
      ++peak.samples;
      if (s.memory.used_bytes &&
          (!peak.peak_used_bytes || *s.memory.used_bytes > *peak.peak_used_bytes)) {
        peak.peak_used_bytes = s.memory.used_bytes;
        peak.peak_t_mono_ns = s.t_mono_ns;
      }
    }
  }
  if (m_options.on_device_sample) {
    for (const DeviceSample& s : taken)
      m_options.on_device_sample(s);
  }
  return true;
}

bool Sampler::sample_processes_once() {
  std::string rows;
  uint64_t count = 0;
  for (unsigned gpu : m_options.gpus) {
    const int64_t t_mono_ns = monotonic_now_ns();
    const int64_t t_wall_ms = unix_now_ms();
    auto procs = m_source->sample_processes(gpu);
    if (!procs) {
      record_failure(procs.error());
      continue;
    }
    for (const ProcessMemory& p : *procs) {
      fmt::format_to(std::back_inserter(rows), "{},{},process,{},{},,,", t_mono_ns, t_wall_ms, gpu,
                     p.pid);
      append_optional(rows, p.used_bytes);
      rows += '\n';
      ++count;
    }
  }
  if (!rows.empty()) {
    if (auto ok = m_gpu_trace.append(rows); !ok) {
      record_fatal(ok.error());
      return false;
    }
  }
  std::lock_guard lock(m_state_mutex);
  m_stats.process_rows += count;
  return true;
}

void Sampler::device_loop() {
  const auto interval = std::chrono::milliseconds(m_options.interval_ms);
  const auto process_interval = std::chrono::milliseconds(m_options.process_interval_ms);
  const Clock::time_point start = Clock::now();
  Clock::time_point next_process = start;
  uint64_t tick = 0;  // the next slot to sample: due at start + tick * interval
  while (!wait_until_due(start + tick * interval)) {
    if (!sample_devices_once()) return;
    if (m_options.process_interval_ms > 0 && Clock::now() >= next_process) {
      if (!sample_processes_once()) return;
      while (next_process <= Clock::now())
        next_process += process_interval;
    }
    ++tick;
    const auto current = static_cast<uint64_t>((Clock::now() - start) / interval);
    if (current > tick) {  // overran whole slots: skip them, sample the current one now
      std::lock_guard lock(m_state_mutex);
      m_stats.missed_ticks += current - tick;
      tick = current;
    }
  }
}

void Sampler::host_loop() {
  const auto interval = std::chrono::milliseconds(m_options.host_interval_ms);
  const pid_t pid = *m_options.host_pid;
  const Clock::time_point start = Clock::now();
  uint64_t tick = 0;
  while (!wait_until_due(start + tick * interval)) {
    const int64_t t_mono_ns = monotonic_now_ns();
    const int64_t t_wall_ms = unix_now_ms();
    auto mem = m_options.host_pid_is_group ? m_proc.sample_group(pid) : m_proc.sample(pid);
    if (!mem) {
      if (mem.error().kind == ErrorKind::not_found) {
        m_host_exited = true;
        std::lock_guard lock(m_state_mutex);
        m_host->exited = true;
        return;
      }
      record_failure(mem.error());
    } else {
      std::string row = fmt::format("{},{},{}", t_mono_ns, t_wall_ms, pid);
      append_optional(row, mem->rss_bytes);
      append_optional(row, mem->pss_bytes);
      row += '\n';
      if (auto ok = m_host_trace.append(row); !ok) {
        record_fatal(ok.error());
        return;
      }
      std::lock_guard lock(m_state_mutex);
      ++m_stats.host_rows;
      HostPeak& h = *m_host;
      h.latest = *mem;
      h.latest_t_mono_ns = t_mono_ns;
      ++h.samples;
      if (mem->rss_bytes)
        h.peak_rss_bytes = std::max(h.peak_rss_bytes.value_or(0), *mem->rss_bytes);
      if (mem->pss_bytes)
        h.peak_pss_bytes = std::max(h.peak_pss_bytes.value_or(0), *mem->pss_bytes);
    }
    if (mem && m_options.on_host_sample) m_options.on_host_sample(t_mono_ns, *mem);
    ++tick;
    const auto current = static_cast<uint64_t>((Clock::now() - start) / interval);
    tick = std::max(tick, current);
  }
}

std::vector<GpuPeak> Sampler::gpu_peaks() const {
  std::lock_guard lock(m_state_mutex);
  std::vector<GpuPeak> out;
  for (unsigned gpu : m_options.gpus) {
    auto it = m_peaks.find(gpu);
    if (it != m_peaks.end()) out.push_back(it->second);
  }
  return out;
}

std::optional<HostPeak> Sampler::host_peak() const {
  std::lock_guard lock(m_state_mutex);
  return m_host;
}

SamplerStats Sampler::stats() const {
  std::lock_guard lock(m_state_mutex);
  return m_stats;
}

}  // namespace kvprof::gpu
