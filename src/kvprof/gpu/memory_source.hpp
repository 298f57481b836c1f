// Where GPU memory readings come from: the MemorySource interface (one driver behind a small
// table of operations), the values it returns, and FakeSource, an in-memory source for tests.
// NvmlSource (nvml.hpp) is the real one.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::gpu {

// One GPU as the driver names it.
struct DeviceInfo {
  unsigned index = 0;
  std::optional<std::string> name;  // "NVIDIA H100 80GB HBM3"
  std::optional<std::string> uuid;  // "GPU-..."
};

// Memory of one GPU at one instant; a field the driver did not give is empty, never 0.
struct DeviceMemory {
  unsigned gpu = 0;
  std::optional<uint64_t> total_bytes;
  std::optional<uint64_t> reserved_bytes;  // driver/firmware reservation (NVML v2 only)
  std::optional<uint64_t> free_bytes;
  std::optional<uint64_t> used_bytes;
  // True when only the v1 query worked: then used_bytes includes the reserved memory and
  // reserved_bytes is empty.
  bool used_includes_reserved = false;
};

// GPU memory held by one process on one GPU.
struct ProcessMemory {
  unsigned gpu = 0;
  uint32_t pid = 0;
  std::optional<uint64_t> used_bytes;  // empty when the driver cannot say (e.g. no permission)
};

// A past reading of one GPU, as a source that keeps history (a Prometheus server) gives it.
struct PastReading {
  int64_t t_wall_ms = 0;  // Unix epoch ms of the reading
  DeviceMemory memory;
};

// Driver-wide facts.
struct DriverInfo {
  std::optional<std::string> driver_version;  // "550.54.15"
  std::optional<int> cuda_driver_version;     // 12040 for CUDA 12.4
};

// Formats a CUDA driver version number as "12.4".
std::string format_cuda_version(int cuda_driver_version);

class MemorySource {
 public:
  virtual ~MemorySource() = default;

  // Number of GPUs; a driver error if the driver cannot count them.
  virtual Expected<unsigned> device_count() = 0;
  // Name and UUID of GPU `gpu`; a driver error for a bad index.
  virtual Expected<DeviceInfo> device_info(unsigned gpu) = 0;
  // Current memory of GPU `gpu`; a driver error when the query fails.
  virtual Expected<DeviceMemory> sample_device(unsigned gpu) = 0;
  // Compute processes on GPU `gpu` and their memory; a driver error when the query fails.
  virtual Expected<std::vector<ProcessMemory>> sample_processes(unsigned gpu) = 0;
  // Driver and CUDA versions (fields empty when unknown).
  virtual DriverInfo driver_info() = 0;

  // What this source's history comes from ("Prometheus query_range"), or nothing when it keeps
  // none (a driver, an exporter's current page).
  [[nodiscard]] virtual std::optional<std::string> history_name() const { return std::nullopt; }
  // Readings of `gpus` in [from_wall_ms, to_wall_ms] every `step_ms`, in time order; a
  // not_found error when the source keeps no history.
  virtual Expected<std::vector<PastReading>> history(const std::vector<unsigned>& gpus,
                                                     int64_t from_wall_ms, int64_t to_wall_ms,
                                                     uint32_t step_ms);

  // Samples each GPU of `gpus` in order; the first error stops and is returned.
  Expected<std::vector<DeviceMemory>> sample_devices(const std::vector<unsigned>& gpus);
  // Samples the processes of each GPU of `gpus`; the first error stops and is returned.
  Expected<std::vector<ProcessMemory>> sample_processes(const std::vector<unsigned>& gpus);
};

// A MemorySource whose readings tests set; thread-safe.
class FakeSource final : public MemorySource {
 public:
  explicit FakeSource(unsigned gpu_count = 1) : m_gpu_count(gpu_count) {}

  // Sets what sample_device(gpu) returns from now on.
  void set_memory(const DeviceMemory& memory);
  // Sets what sample_processes(gpu) returns from now on.
  void set_processes(unsigned gpu, std::vector<ProcessMemory> processes);
  // Makes every query fail with `error` (or succeed again with std::nullopt).
  void set_failure(std::optional<Error> error);
  // Number of sample_device calls so far.
  [[nodiscard]] uint64_t device_queries() const;

  Expected<unsigned> device_count() override;
  Expected<DeviceInfo> device_info(unsigned gpu) override;
  Expected<DeviceMemory> sample_device(unsigned gpu) override;
  Expected<std::vector<ProcessMemory>> sample_processes(unsigned gpu) override;
  using MemorySource::sample_processes;
  DriverInfo driver_info() override { return {}; }

 private:
  mutable std::mutex m_mutex;
  unsigned m_gpu_count = 1;
  std::map<unsigned, DeviceMemory> m_memory;
  std::map<unsigned, std::vector<ProcessMemory>> m_processes;
  std::optional<Error> m_failure;
  uint64_t m_device_queries = 0;
};

}  // namespace kvprof::gpu
