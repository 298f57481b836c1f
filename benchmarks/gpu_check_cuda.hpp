// The CUDA driver API as bench_gpu_check (benchmarks/gpu_check.cpp) uses it: the few types and
// entry points declared here from the public ABI (cuda.h and nvcc are not needed), resolved with
// dlsym from a dlopen'ed libcuda.so.1, so the check builds and runs on machines without CUDA.
#pragma once

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "kvprof/util/error.hpp"

namespace gpu_check {

using kvprof::ErrorKind;
using kvprof::Expected;
using kvprof::fail;

// ---- The CUDA driver API, declared here from its public ABI (cuda.h is not needed) ----
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUdeviceptr = unsigned long long;
struct CUuuid {
  unsigned char bytes[16];
};
constexpr CUresult k_cuda_success = 0;

struct DlClose {
  void operator()(void* handle) const {
    if (handle != nullptr) dlclose(handle);
  }
};

// The CUDA driver entry points this check calls, resolved from a dlopen'ed libcuda.so.1.
struct CudaDriver {
  std::unique_ptr<void, DlClose> library;
  CUresult (*init)(unsigned int) = nullptr;
  CUresult (*device_count)(int*) = nullptr;
  CUresult (*device_get)(CUdevice*, int) = nullptr;
  CUresult (*device_uuid)(CUuuid*, CUdevice) = nullptr;
  CUresult (*ctx_retain)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_release)(CUdevice) = nullptr;
  CUresult (*ctx_set_current)(CUcontext) = nullptr;
  CUresult (*ctx_synchronize)() = nullptr;
  CUresult (*mem_alloc)(CUdeviceptr*, size_t) = nullptr;
  CUresult (*memset_d8)(CUdeviceptr, unsigned char, size_t) = nullptr;
  CUresult (*mem_free)(CUdeviceptr) = nullptr;
  CUresult (*error_name)(CUresult, const char**) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;

  // Ok, or an error "<what> failed: CUDA_ERROR_X: <cuGetErrorString>" when `rc` is not success.
  [[nodiscard]] Expected<void> ok(CUresult rc, const char* what) const {
    if (rc == k_cuda_success) return {};
    const char* name = nullptr;
    const char* text = nullptr;
    if (error_name != nullptr) error_name(rc, &name);
    if (error_string != nullptr) error_string(rc, &text);
    return fail(ErrorKind::driver, fmt::format("{} failed: {}: {}", what,
                                               name != nullptr ? name : fmt::format("error {}", rc),
                                               text != nullptr ? text : "no description"));
  }
};

// Sets `fn` to `versioned` from `library`, else to `plain`; false when neither exists.
template <class Fn>
bool resolve(void* library, Fn& fn, const char* versioned, const char* plain = nullptr) {
  fn = reinterpret_cast<Fn>(dlsym(library, versioned));
  if (fn == nullptr && plain != nullptr) fn = reinterpret_cast<Fn>(dlsym(library, plain));
  return fn != nullptr;
}

// Loads libcuda.so.1 and the entry points above; an error when it is absent or incomplete.
inline Expected<std::unique_ptr<CudaDriver>> open_cuda() {
  auto cuda = std::make_unique<CudaDriver>();
  cuda->library.reset(dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL));
  if (!cuda->library) {
    const char* why = dlerror();
    return fail(ErrorKind::not_found, fmt::format("no CUDA driver ({})",
                                                  why != nullptr ? why : "libcuda.so.1 not found"));
  }
  void* lib = cuda->library.get();
  CudaDriver& c = *cuda;
  const bool complete =
      resolve(lib, c.init, "cuInit") && resolve(lib, c.device_count, "cuDeviceGetCount") &&
      resolve(lib, c.device_get, "cuDeviceGet") &&
      resolve(lib, c.device_uuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid") &&
      resolve(lib, c.ctx_retain, "cuDevicePrimaryCtxRetain") &&
      resolve(lib, c.ctx_release, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease") &&
      resolve(lib, c.ctx_set_current, "cuCtxSetCurrent") &&
      resolve(lib, c.ctx_synchronize, "cuCtxSynchronize") &&
      resolve(lib, c.mem_alloc, "cuMemAlloc_v2") && resolve(lib, c.memset_d8, "cuMemsetD8_v2") &&
      resolve(lib, c.mem_free, "cuMemFree_v2") && resolve(lib, c.error_name, "cuGetErrorName") &&
      resolve(lib, c.error_string, "cuGetErrorString");
  if (!complete) return fail(ErrorKind::driver, "libcuda.so.1 lacks a CUDA driver entry point");
  return cuda;
}

// Formats a CUDA UUID as NVML does: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
inline std::string format_uuid(const CUuuid& uuid) {
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += fmt::format("{:02x}", uuid.bytes[i]);
  }
  return text;
}

// True when `uuid` has NVML's form for a whole GPU, "GPU-" and 36 hex digits and dashes.
inline bool is_gpu_uuid(const std::string& uuid) {
  return uuid.size() == 40 && uuid.starts_with("GPU-") &&
         uuid.find_first_not_of("0123456789abcdef-", 4) == std::string::npos;
}

// The CUDA device whose UUID is NVML's `nvml_uuid` (CUDA's order and CUDA_VISIBLE_DEVICES can
// differ from NVML's indices), or ordinal `gpu` when NVML gave no GPU UUID (e.g. a fake NVML);
// an error when no device matches.
inline Expected<CUdevice> find_cuda_device(const CudaDriver& cuda, unsigned gpu,
                                           const std::optional<std::string>& nvml_uuid) {
  const bool by_uuid = nvml_uuid && is_gpu_uuid(*nvml_uuid);
  int count = 0;
  if (auto ok = cuda.ok(cuda.device_count(&count), "cuDeviceGetCount"); !ok) {
    return std::unexpected(ok.error());
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    if (auto ok = cuda.ok(cuda.device_get(&device, ordinal), "cuDeviceGet"); !ok) {
      return std::unexpected(ok.error());
    }
    CUuuid uuid{};
    if (by_uuid
            ? cuda.device_uuid(&uuid, device) == k_cuda_success && format_uuid(uuid) == *nvml_uuid
            : ordinal == static_cast<int>(gpu)) {
      return device;
    }
  }
  return fail(ErrorKind::not_found, fmt::format("none of CUDA's {} devices is NVML's GPU {} ({})",
                                                count, gpu, nvml_uuid.value_or("no UUID")));
}

// Holds the primary context and the allocation; releases what is still held when destroyed.
struct CudaHold {
  const CudaDriver& cuda;
  CUdevice device = 0;
  bool retained = false;
  CUdeviceptr pointer = 0;
  ~CudaHold() {
    if (pointer != 0) cuda.mem_free(pointer);
    if (retained) cuda.ctx_release(device);
  }
};

}  // namespace gpu_check
