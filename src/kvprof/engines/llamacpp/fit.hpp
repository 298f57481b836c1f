// llama.cpp's --fit (on by default from b7407, #16653; common/fit.cpp from b8882): before it
// loads the model, llama-server measures candidate settings by dry runs and keeps what leaves
// --fit-target MiB free on the device — the context it was not given, then the GPU layers and
// the MoE experts it was not given. kvprof's plan of each candidate is the dry run.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/engines/llamacpp/buffers.hpp"
#include "kvprof/model/model_spec.hpp"

namespace kvprof::engines {

struct LlamaCppFitInput {
  uint64_t free_bytes = 0;             // the GPU's free memory; with no GPU, the host's total
  uint64_t target_bytes = 1ULL << 30;  // --fit-target: what to leave free (1024 MiB)
  uint32_t n_ctx_min = 4096;           // --fit-ctx: the context is not lowered below it
  bool ctx_auto = false;               // -c not given: the model's context, lowered if need be
  // -ngl, -ts, -ot, --cpu-moe or --n-cpu-moe given: llama.cpp changes only the context.
  bool layers_given = false;
  uint32_t build = 0;            // the release's build: the expert pattern's gate_up from b8497
  std::string device = "CUDA0";  // as its lines name the GPU: "CUDA0 (NVIDIA GeForce RTX 4090)"
};

struct LlamaCppFitResult {
  LlamaCppSettings settings;       // what llama.cpp loads the model with
  bool changed = false;            // the fit changed a setting
  bool success = true;             // false: even the fitted settings leave less than the target
  std::vector<std::string> lines;  // what it logs (common_params_fit_impl / llama_params_fit_impl)
  std::string args;                // what llama-fit-params prints: -c N -ngl N [-ot "..."]
};

// What one candidate needs of the device (the busiest GPU, or the host without one); nullopt when
// the candidate cannot be planned.
using LlamaCppDeviceUse = std::function<std::optional<uint64_t>(const LlamaCppSettings&)>;

// llama.cpp's fit of `given` (its n_ctx already the model's context when `in.ctx_auto`) for
// `model`, one GPU (or the host), each candidate measured by `use`.
LlamaCppFitResult fit_llamacpp(const model::ModelSpec& model, const LlamaCppSettings& given,
                               const LlamaCppFitInput& in, const LlamaCppDeviceUse& use);

}  // namespace kvprof::engines
