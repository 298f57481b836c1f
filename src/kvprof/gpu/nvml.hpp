// NvmlSource: GPU memory from NVIDIA's NVML, loaded with dlopen("libnvidia-ml.so.1") at run time
// (kvprof never links it, so it runs on machines without a driver). Versioned entry points first:
// nvmlDeviceGetMemoryInfo_v2 (total/reserved/free/used), falling back to v1 (used includes
// reserved); nvmlDeviceGetComputeRunningProcesses_v3, falling back to _v2.
#pragma once

#include <memory>
#include <string>

#include "kvprof/gpu/memory_source.hpp"

namespace kvprof::gpu {

// The environment variable that names another NVML library to load (tests: the fake NVML).
inline constexpr const char* k_nvml_library_env = "KVPROF_NVML_LIBRARY";
inline constexpr const char* k_nvml_default_library = "libnvidia-ml.so.1";

class NvmlSource final : public MemorySource {
 public:
  // Loads NVML from `library_path`, else $KVPROF_NVML_LIBRARY, else libnvidia-ml.so.1, and
  // initialises it. Returns a driver error "no NVIDIA driver (libnvidia-ml.so.1 not found)" when
  // the library is absent, or naming the NVML error when initialisation fails.
  static Expected<std::unique_ptr<NvmlSource>> open(const std::string& library_path = "");

  ~NvmlSource() override;
  NvmlSource(const NvmlSource&) = delete;
  NvmlSource& operator=(const NvmlSource&) = delete;

  Expected<unsigned> device_count() override;
  Expected<DeviceInfo> device_info(unsigned gpu) override;
  Expected<DeviceMemory> sample_device(unsigned gpu) override;
  Expected<std::vector<ProcessMemory>> sample_processes(unsigned gpu) override;
  using MemorySource::sample_processes;
  DriverInfo driver_info() override;

  // The library that was loaded (as given to dlopen).
  [[nodiscard]] const std::string& library_path() const { return m_library_path; }
  // True when nvmlDeviceGetMemoryInfo_v2 is used (false: v1, whose used includes reserved).
  [[nodiscard]] bool has_memory_v2() const;

  struct Impl;  // the dlopen handle and resolved entry points (nvml.cpp)

 private:
  explicit NvmlSource(std::unique_ptr<Impl> impl, std::string library_path);
  std::unique_ptr<Impl> m_impl;
  std::string m_library_path;
};

}  // namespace kvprof::gpu
