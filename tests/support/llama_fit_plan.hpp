// Test-only: llama.cpp plans with --fit on, and the lines the fit logs.
#pragma once

#include <cstdint>
#include <string>

#include "kvprof/engines/registry.hpp"
#include "kvprof/model/catalog.hpp"

namespace kvprof::test {

// `model` on `gpu` (`n_gpus` of them through -dev when more than one) planned for llama.cpp
// release `release` with --fit on and 256 GiB of host memory.
inline estimate::EstimateInput llama_fit_input(const char* model, const char* gpu,
                                               const char* release, uint32_t n_gpus = 0) {
  estimate::EstimateInput in;
  in.model = model::catalog_model(model).value();
  in.gpu = gpu::find_gpu(gpu).value();
  in.settings.engine = engines::Engine::llamacpp;
  in.settings.engine_version = release;
  in.settings.fit = true;
  in.settings.n_devices = n_gpus;
  in.settings.host_memory_bytes = 256ULL << 30;
  return in;
}

// True when a line the fit logs holds `part`.
inline bool fit_logged(const estimate::Estimate& e, const std::string& part) {
  for (const auto& l : e.llamacpp->fit_lines) {
    if (l.find(part) != std::string::npos) return true;
  }
  return false;
}

}  // namespace kvprof::test
