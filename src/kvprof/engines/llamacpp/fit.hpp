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
  uint64_t free_bytes = 0;             // each GPU's free memory; with no GPU, the host's total
  uint64_t target_bytes = 1ULL << 30;  // --fit-target: what to leave free on each (1024 MiB)
  uint32_t n_ctx_min = 4096;           // --fit-ctx: the context is not lowered below it
  bool ctx_auto = false;               // -c not given: the model's context, lowered if need be
  // What the user gave that makes llama.cpp change only the context (it aborts the layer step):
  bool ngl_given = false;        // -ngl
  bool split_given = false;      // -ts (over several GPUs)
  bool overrides_given = false;  // -ot, --cpu-moe, --n-cpu-moe
  uint32_t build = 0;            // the release's build: the expert pattern's gate_up from b8497
  // The GPU's name as llama.cpp's lines show it after the device: "CUDA0 (NVIDIA GeForce RTX
  // 4090)"; the GPUs are settings.tensor_split's (one without it).
  std::string gpu_name = "GPU";
};

struct LlamaCppFitResult {
  LlamaCppSettings settings;       // what llama.cpp loads the model with
  bool changed = false;            // the fit changed a setting
  bool split_set = false;          // it split the layers over several GPUs (-ts)
  bool success = true;             // false: even the fitted settings leave less than the target
  std::vector<std::string> lines;  // what it logs (common_params_fit_impl / llama_params_fit_impl)
  std::string args;                // what llama-fit-params prints: -c N -ngl N [-ts ...] [-ot ...]
};

// One dry run of a candidate: what each GPU needs (the host's RAM, one entry, without a GPU) and
// the model's bytes on the GPUs together.
struct LlamaCppDryRun {
  std::vector<uint64_t> used_bytes;
  uint64_t model_bytes = 0;
};

// The dry run of candidate settings; nullopt when the candidate cannot be planned.
using LlamaCppMeasure = std::function<std::optional<LlamaCppDryRun>(const LlamaCppSettings&)>;

// llama.cpp's fit of `given` (its n_ctx already the model's context when `in.ctx_auto`) for
// `model` on the GPUs of given.tensor_split (one without it; the host without a GPU), each
// candidate measured by `measure`.
LlamaCppFitResult fit_llamacpp(const model::ModelSpec& model, const LlamaCppSettings& given,
                               const LlamaCppFitInput& in, const LlamaCppMeasure& measure);

}  // namespace kvprof::engines
