// NvmlSource: the few NVML types and entry points kvprof uses, declared here from the public NVML
// API (nvml.h is not needed), resolved with dlsym from a dlopen'ed libnvidia-ml.so.1.
#include "kvprof/gpu/nvml.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace kvprof::gpu {
namespace {

// ---- NVML ABI facts (public NVML API) ----
using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

constexpr nvmlReturn_t k_nvml_success = 0;
constexpr nvmlReturn_t k_nvml_error_not_supported = 3;
constexpr nvmlReturn_t k_nvml_error_insufficient_size = 7;
constexpr nvmlReturn_t k_nvml_error_function_not_found = 13;
constexpr nvmlReturn_t k_nvml_error_argument_version_mismatch = 25;

// nvmlMemory_t (v1): used includes the driver's reserved memory.
struct NvmlMemoryV1 {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
// nvmlMemory_v2_t: used excludes reserved.
struct NvmlMemoryV2 {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
static_assert(sizeof(NvmlMemoryV2) == 40, "nvmlMemory_v2_t is 40 bytes");
// NVML_STRUCT_VERSION(Memory, 2) = sizeof(nvmlMemory_v2_t) | (2 << 24).
constexpr unsigned int k_nvml_memory_v2 =
    static_cast<unsigned int>(sizeof(NvmlMemoryV2)) | (2U << 24);

// nvmlProcessInfo_v2_t, the layout the _v2 and _v3 process queries fill (24 bytes; the 32-byte
// variant with usedGpuCcProtectedMemory briefly in one header was reverted and is not what
// drivers write).
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(NvmlProcessInfo) == 24, "nvmlProcessInfo_v2_t is 24 bytes");
constexpr unsigned long long k_nvml_value_not_available = ~0ULL;

constexpr unsigned int k_name_buffer = 96;            // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned int k_uuid_buffer = 96;            // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned int k_driver_version_buffer = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
constexpr unsigned int k_max_processes = 4096;        // bound on what we ask the driver for
constexpr unsigned int k_max_devices = 256;

using InitFn = nvmlReturn_t (*)();
using ShutdownFn = nvmlReturn_t (*)();
using ErrorStringFn = const char* (*)(nvmlReturn_t);
using CountFn = nvmlReturn_t (*)(unsigned int*);
using HandleFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using StringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using MemoryV1Fn = nvmlReturn_t (*)(nvmlDevice_t, NvmlMemoryV1*);
using MemoryV2Fn = nvmlReturn_t (*)(nvmlDevice_t, NvmlMemoryV2*);
using ProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, NvmlProcessInfo*);
using DriverVersionFn = nvmlReturn_t (*)(char*, unsigned int);
using CudaVersionFn = nvmlReturn_t (*)(int*);

struct DlClose {
  void operator()(void* handle) const {
    if (handle != nullptr) dlclose(handle);
  }
};

}  // namespace

struct NvmlSource::Impl {
  std::unique_ptr<void, DlClose> library;  // declared first: closed last
  InitFn init = nullptr;
  ShutdownFn shutdown = nullptr;
  ErrorStringFn error_string = nullptr;
  CountFn count = nullptr;
  HandleFn handle_by_index = nullptr;
  StringFn name = nullptr;
  StringFn uuid = nullptr;
  MemoryV1Fn memory_v1 = nullptr;
  MemoryV2Fn memory_v2 = nullptr;
  ProcessesFn processes_v3 = nullptr;
  ProcessesFn processes_v2 = nullptr;
  DriverVersionFn driver_version = nullptr;
  CudaVersionFn cuda_version = nullptr;
  bool initialised = false;
  std::atomic<bool> use_memory_v2{true};
  std::atomic<bool> use_processes_v3{true};
  std::vector<nvmlDevice_t> devices;  // by index, filled once at open

  ~Impl() {
    if (initialised && shutdown != nullptr) shutdown();
  }

  template <class Fn>
  Fn symbol(const char* symbol_name) const {
    return reinterpret_cast<Fn>(dlsym(library.get(), symbol_name));
  }
  template <class Fn>
  Fn symbol(const char* versioned, const char* plain) const {
    auto fn = symbol<Fn>(versioned);
    return fn != nullptr ? fn : symbol<Fn>(plain);
  }

  [[nodiscard]] std::string describe(nvmlReturn_t rc) const {
    const char* text = error_string != nullptr ? error_string(rc) : nullptr;
    return text != nullptr ? fmt::format("{} (NVML error {})", text, rc)
                           : fmt::format("NVML error {}", rc);
  }

  [[nodiscard]] Expected<nvmlDevice_t> device(unsigned gpu) const {
    if (gpu >= devices.size()) {
      return fail(ErrorKind::driver,
                  fmt::format("no GPU {} (this machine has {})", gpu, devices.size()));
    }
    return devices[gpu];
  }
};

NvmlSource::NvmlSource(std::unique_ptr<Impl> impl, std::string library_path)
    : m_impl(std::move(impl)), m_library_path(std::move(library_path)) {}

NvmlSource::~NvmlSource() = default;

Expected<std::unique_ptr<NvmlSource>> NvmlSource::open(const std::string& library_path) {
  std::string path = library_path;
  if (path.empty()) {
    const char* env = std::getenv(k_nvml_library_env);
    path = (env != nullptr && *env != '\0') ? env : k_nvml_default_library;
  }
  auto impl = std::make_unique<Impl>();
  impl->library.reset(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!impl->library) {
    if (path == k_nvml_default_library) {
      return fail(ErrorKind::driver, "no NVIDIA driver (libnvidia-ml.so.1 not found)");
    }
    const char* why = dlerror();
    return fail(ErrorKind::driver, fmt::format("no NVIDIA driver (cannot load '{}': {})", path,
                                               why != nullptr ? why : "unknown error"));
  }
  Impl& n = *impl;
  n.init = n.symbol<InitFn>("nvmlInit_v2", "nvmlInit");
  n.shutdown = n.symbol<ShutdownFn>("nvmlShutdown");
  n.error_string = n.symbol<ErrorStringFn>("nvmlErrorString");
  n.count = n.symbol<CountFn>("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  n.handle_by_index =
      n.symbol<HandleFn>("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
  n.name = n.symbol<StringFn>("nvmlDeviceGetName");
  n.uuid = n.symbol<StringFn>("nvmlDeviceGetUUID");
  n.memory_v2 = n.symbol<MemoryV2Fn>("nvmlDeviceGetMemoryInfo_v2");
  n.memory_v1 = n.symbol<MemoryV1Fn>("nvmlDeviceGetMemoryInfo");
  n.processes_v3 = n.symbol<ProcessesFn>("nvmlDeviceGetComputeRunningProcesses_v3");
  n.processes_v2 = n.symbol<ProcessesFn>("nvmlDeviceGetComputeRunningProcesses_v2");
  n.driver_version = n.symbol<DriverVersionFn>("nvmlSystemGetDriverVersion");
  n.cuda_version = n.symbol<CudaVersionFn>("nvmlSystemGetCudaDriverVersion_v2",
                                           "nvmlSystemGetCudaDriverVersion");
  if (n.init == nullptr || n.shutdown == nullptr || n.count == nullptr ||
      n.handle_by_index == nullptr || (n.memory_v1 == nullptr && n.memory_v2 == nullptr)) {
    return fail(ErrorKind::driver,
                fmt::format("'{}' is not a usable NVML library (missing entry points)", path));
  }
  n.use_memory_v2 = n.memory_v2 != nullptr;
  n.use_processes_v3 = n.processes_v3 != nullptr;

  if (const nvmlReturn_t rc = n.init(); rc != k_nvml_success) {
    return fail(ErrorKind::driver,
                fmt::format("NVIDIA driver not usable: nvmlInit failed: {}", n.describe(rc)));
  }
  n.initialised = true;
  unsigned int count = 0;
  if (const nvmlReturn_t rc = n.count(&count); rc != k_nvml_success) {
    return fail(ErrorKind::driver, fmt::format("NVML cannot count the GPUs: {}", n.describe(rc)));
  }
  count = std::min(count, k_max_devices);
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t dev = nullptr;
    if (const nvmlReturn_t rc = n.handle_by_index(i, &dev); rc != k_nvml_success) {
      return fail(ErrorKind::driver, fmt::format("NVML cannot open GPU {}: {}", i, n.describe(rc)));
    }
    n.devices.push_back(dev);
  }
  return std::unique_ptr<NvmlSource>(new NvmlSource(std::move(impl), path));
}

bool NvmlSource::has_memory_v2() const {
  return m_impl->use_memory_v2.load();
}

Expected<unsigned> NvmlSource::device_count() {
  return static_cast<unsigned>(m_impl->devices.size());
}

Expected<DeviceInfo> NvmlSource::device_info(unsigned gpu) {
  auto dev = m_impl->device(gpu);
  if (!dev) return std::unexpected(dev.error());
  DeviceInfo info;
  info.index = gpu;
  char buffer[std::max(k_name_buffer, k_uuid_buffer)] = {};
  if (m_impl->name != nullptr && m_impl->name(*dev, buffer, k_name_buffer) == k_nvml_success) {
    info.name = std::string(buffer, strnlen(buffer, k_name_buffer));
  }
  if (m_impl->uuid != nullptr && m_impl->uuid(*dev, buffer, k_uuid_buffer) == k_nvml_success) {
    info.uuid = std::string(buffer, strnlen(buffer, k_uuid_buffer));
  }
  return info;
}

Expected<DeviceMemory> NvmlSource::sample_device(unsigned gpu) {
  auto dev = m_impl->device(gpu);
  if (!dev) return std::unexpected(dev.error());
  DeviceMemory out;
  out.gpu = gpu;
  if (m_impl->use_memory_v2.load(std::memory_order_relaxed)) {
    NvmlMemoryV2 mem{};
    mem.version = k_nvml_memory_v2;
    const nvmlReturn_t rc = m_impl->memory_v2(*dev, &mem);
    if (rc == k_nvml_success) {
      out.total_bytes = mem.total;
      out.reserved_bytes = mem.reserved;
      out.free_bytes = mem.free;
      out.used_bytes = mem.used;
      return out;
    }
    const bool unsupported = rc == k_nvml_error_function_not_found ||
                             rc == k_nvml_error_argument_version_mismatch ||
                             rc == k_nvml_error_not_supported;
    if (!unsupported || m_impl->memory_v1 == nullptr) {
      return fail(ErrorKind::driver,
                  fmt::format("NVML memory query failed on GPU {}: {}", gpu, m_impl->describe(rc)));
    }
    m_impl->use_memory_v2 = false;  // this driver has no v2: use v1 from now on
  }
  NvmlMemoryV1 mem{};
  if (const nvmlReturn_t rc = m_impl->memory_v1(*dev, &mem); rc != k_nvml_success) {
    return fail(ErrorKind::driver,
                fmt::format("NVML memory query failed on GPU {}: {}", gpu, m_impl->describe(rc)));
  }
  out.total_bytes = mem.total;
  out.free_bytes = mem.free;
  out.used_bytes = mem.used;
  out.used_includes_reserved = true;
  return out;
}

Expected<std::vector<ProcessMemory>> NvmlSource::sample_processes(unsigned gpu) {
  auto dev = m_impl->device(gpu);
  if (!dev) return std::unexpected(dev.error());
  for (int version_tries = 0; version_tries < 2; ++version_tries) {
    const bool v3 = m_impl->use_processes_v3.load(std::memory_order_relaxed);
    ProcessesFn fn = v3 ? m_impl->processes_v3 : m_impl->processes_v2;
    if (fn == nullptr) {
      return fail(ErrorKind::driver, "this NVML library cannot list GPU processes");
    }
    unsigned int capacity = 32;
    for (int size_tries = 0; size_tries < 6; ++size_tries) {
      std::vector<NvmlProcessInfo> buffer(capacity);
      unsigned int count = capacity;
      const nvmlReturn_t rc = fn(*dev, &count, buffer.data());
      if (rc == k_nvml_success) {
        std::vector<ProcessMemory> out;
        count = std::min(count, capacity);
        out.reserve(count);
        for (unsigned int i = 0; i < count; ++i) {
          ProcessMemory p;
          p.gpu = gpu;
          p.pid = buffer[i].pid;
          if (buffer[i].usedGpuMemory != k_nvml_value_not_available) {
            p.used_bytes = buffer[i].usedGpuMemory;
          }
          out.push_back(p);
        }
        return out;
      }
      if (rc == k_nvml_error_insufficient_size && capacity < k_max_processes) {
        // processes may appear between calls: leave room
        capacity = std::min(k_max_processes, std::max(count + 16, capacity * 2));
        continue;
      }
      if (v3 && rc == k_nvml_error_function_not_found && m_impl->processes_v2 != nullptr) {
        m_impl->use_processes_v3 = false;
        break;
      }
      return fail(ErrorKind::driver, fmt::format("NVML process query failed on GPU {}: {}", gpu,
                                                 m_impl->describe(rc)));
    }
    if (m_impl->use_processes_v3.load() == v3) break;  // gave up growing the buffer
  }
  return fail(ErrorKind::driver,
              fmt::format("NVML process query failed on GPU {}: too many processes", gpu));
}

DriverInfo NvmlSource::driver_info() {
  DriverInfo info;
  if (m_impl->driver_version != nullptr) {
    char buffer[k_driver_version_buffer] = {};
    if (m_impl->driver_version(buffer, k_driver_version_buffer) == k_nvml_success) {
      info.driver_version = std::string(buffer, strnlen(buffer, k_driver_version_buffer));
    }
  }
  if (m_impl->cuda_version != nullptr) {
    int version = 0;
    if (m_impl->cuda_version(&version) == k_nvml_success && version > 0) {
      info.cuda_driver_version = version;
    }
  }
  return info;
}

}  // namespace kvprof::gpu
