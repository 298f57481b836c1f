// The built-in GPU catalog (data/gpus.json): memory as the driver reports it, bandwidth, peak
// TFLOPs; and lookup by the names people write ("H100", "h100-sxm", "NVIDIA H100 80GB HBM3").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::gpu {

struct GpuSpec {
  std::string id;    // catalog id, e.g. "H100-SXM"
  std::string name;  // as NVML/nvidia-smi names it, e.g. "NVIDIA H100 80GB HBM3"
  std::vector<std::string> aliases;
  std::string vendor;               // "nvidia" or "amd"
  std::string arch;                 // "ampere", "ada", "hopper", "blackwell", "cdna3"
  uint32_t compute_capability = 0;  // 80, 89, 90, 100, 120 (0 for AMD)
  // How GPUs of a node talk: "nvlink" (SXM parts on NVLink/NVSwitch, where NCCL's NVLS and the
  // engines' symmetric-memory all-reduce hold large buffers), "pcie" (cards, NVL bridges
  // included) or "infinity-fabric" (AMD OAM parts).
  std::string interconnect = "nvlink";
  uint64_t memory_bytes = 0;  // usable total the driver reports (CUDA total, NVML total - reserved)
  uint64_t memory_nominal_bytes = 0;  // marketed capacity (80 GB = 80e9 or 80 GiB as marketed)
  double bandwidth_gb_s = 0;          // peak memory bandwidth, GB/s
  double tflops_bf16 = 0;             // dense peak, TFLOP/s
  double tflops_fp8 = 0;              // dense peak, 0 when the GPU has no fp8 tensor cores
  double price_hint = 0;  // relative cost rank for sorting recommendations (0 = unknown)
  std::string source;     // where the figures come from

  [[nodiscard]] bool supports_fp8() const { return tflops_fp8 > 0; }
  [[nodiscard]] bool pcie() const { return interconnect == "pcie"; }
};

// The catalog, parsed once from the embedded data/gpus.json; throws Fatal(internal) if the
// embedded file is malformed (a build defect, caught by the tests).
const std::vector<GpuSpec>& gpu_catalog();

// Finds a GPU by id, alias or NVML name, ignoring case, spaces, dashes and a leading
// "NVIDIA"/"AMD"; returns not_found naming the closest catalog entries otherwise.
Expected<GpuSpec> find_gpu(std::string_view name);

// A GPU that is not in the catalog, known only by its usable memory (--gpu-mem 24GiB).
GpuSpec custom_gpu(uint64_t memory_bytes);

// Whether `name` asks for no GPU at all ("cpu", "none"): a CPU-only deployment (llama.cpp).
bool names_no_gpu(std::string_view name);

// The stand-in of a CPU-only deployment: id "cpu", named "none (CPU)", 1 byte of memory (the
// plan budgets host RAM instead).
GpuSpec no_gpu();

}  // namespace kvprof::gpu
