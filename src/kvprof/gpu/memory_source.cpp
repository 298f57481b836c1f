// MemorySource helpers and the in-memory FakeSource.
#include "kvprof/gpu/memory_source.hpp"

#include <fmt/format.h>

namespace kvprof::gpu {

std::string format_cuda_version(int cuda_driver_version) {
  return fmt::format("{}.{}", cuda_driver_version / 1000, (cuda_driver_version % 1000) / 10);
}

Expected<std::vector<PastReading>> MemorySource::history(const std::vector<unsigned>& gpus,
                                                         int64_t from_wall_ms, int64_t to_wall_ms,
                                                         uint32_t step_ms) {
  (void)gpus, (void)from_wall_ms, (void)to_wall_ms, (void)step_ms;
  return fail(ErrorKind::not_found, "this GPU memory source keeps no history");
}

Expected<std::vector<DeviceMemory>> MemorySource::sample_devices(
    const std::vector<unsigned>& gpus) {
  std::vector<DeviceMemory> out;
  out.reserve(gpus.size());
  for (unsigned gpu : gpus) {
    auto memory = sample_device(gpu);
    if (!memory) return std::unexpected(memory.error());
    out.push_back(*memory);
  }
  return out;
}

Expected<std::vector<ProcessMemory>> MemorySource::sample_processes(
    const std::vector<unsigned>& gpus) {
  std::vector<ProcessMemory> out;
  for (unsigned gpu : gpus) {
    auto procs = sample_processes(gpu);
    if (!procs) return std::unexpected(procs.error());
    out.insert(out.end(), procs->begin(), procs->end());
  }
  return out;
}

void FakeSource::set_memory(const DeviceMemory& memory) {
  std::lock_guard lock(m_mutex);
  m_memory[memory.gpu] = memory;
}

void FakeSource::set_processes(unsigned gpu, std::vector<ProcessMemory> processes) {
  std::lock_guard lock(m_mutex);
  m_processes[gpu] = std::move(processes);
}

void FakeSource::set_failure(std::optional<Error> error) {
  std::lock_guard lock(m_mutex);
  m_failure = std::move(error);
}

uint64_t FakeSource::device_queries() const {
  std::lock_guard lock(m_mutex);
  return m_device_queries;
}

Expected<unsigned> FakeSource::device_count() {
  std::lock_guard lock(m_mutex);
  if (m_failure) return std::unexpected(*m_failure);
  return m_gpu_count;
}

Expected<DeviceInfo> FakeSource::device_info(unsigned gpu) {
  std::lock_guard lock(m_mutex);
  if (m_failure) return std::unexpected(*m_failure);
  if (gpu >= m_gpu_count) return fail(ErrorKind::driver, fmt::format("no GPU {}", gpu));
  return DeviceInfo{gpu, "Fake GPU", fmt::format("GPU-fakesource-{}", gpu)};
}

Expected<DeviceMemory> FakeSource::sample_device(unsigned gpu) {
  std::lock_guard lock(m_mutex);
  ++m_device_queries;
  if (m_failure) return std::unexpected(*m_failure);
  if (gpu >= m_gpu_count) return fail(ErrorKind::driver, fmt::format("no GPU {}", gpu));
  auto it = m_memory.find(gpu);
  if (it == m_memory.end()) {
    DeviceMemory empty;
    empty.gpu = gpu;
    return empty;
  }
  return it->second;
}

Expected<std::vector<ProcessMemory>> FakeSource::sample_processes(unsigned gpu) {
  std::lock_guard lock(m_mutex);
  if (m_failure) return std::unexpected(*m_failure);
  if (gpu >= m_gpu_count) return fail(ErrorKind::driver, fmt::format("no GPU {}", gpu));
  auto it = m_processes.find(gpu);
  if (it == m_processes.end()) return std::vector<ProcessMemory>{};
  return it->second;
}

}  // namespace kvprof::gpu
