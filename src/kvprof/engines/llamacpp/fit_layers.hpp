// The layer steps of llama.cpp's --fit (fit.hpp), as common/fit.cpp takes them once the context
// is settled: each GPU filled from the last with as many layers as leave its target free (a MoE
// model's dense-only, experts on the host), then, for a MoE model whose dense weights all fit,
// full layers from the first GPU on and part of one more layer overflowing to the next GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvprof/engines/llamacpp/fit.hpp"

namespace kvprof::engines {

// Whole MiB, as llama.cpp's lines divide bytes.
inline int64_t fit_mib(int64_t bytes) {
  return bytes / (int64_t{1} << 20);
}

// What the layer steps work with.
struct FitLayersContext {
  const model::ModelSpec& model;
  const LlamaCppFitInput& in;
  const LlamaCppMeasure& measure;
  std::vector<std::string> gpu_names;    // as the lines name each GPU: "CUDA0 (NVIDIA ...)"
  std::function<void(std::string)> log;  // one line, without llama.cpp's function prefix
};

// The layers, -ts and overrides llama.cpp's fit chooses for `r.settings` (its context settled,
// nothing of -ngl, -ts or -ot given) on ctx.gpu_names' GPUs; sets r.settings, r.changed,
// r.split_set and r.success (false where a GPU is left short of its target), and logs the lines
// llama.cpp logs.
void fit_llamacpp_layers(const FitLayersContext& ctx, LlamaCppFitResult& r);

}  // namespace kvprof::engines
