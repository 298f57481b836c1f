// The built-in default of `kvprof profile` (no --endpoint, --launch or --sim): a real llama.cpp
// server — `kvprof serve` over libllama — on a dummy-weight GGUF of a small catalog model, made
// once under the results folder, so the first run measures a real engine against the plan.
#pragma once

#include <filesystem>
#include <string>

#include "kvprof/util/error.hpp"

namespace kvprof::cli {

// The model the default engine serves (its GGUF has dummy weights, Q8_0).
inline constexpr std::string_view k_default_engine_model = "Qwen/Qwen2.5-0.5B-Instruct";
// Its context and slots: -c 4096 shared by -np 4.
inline constexpr uint32_t k_default_engine_ctx = 4096;
inline constexpr uint32_t k_default_engine_slots = 4;
// The largest dummy GGUF the default makes (a bigger model: --launch or --sim).
inline constexpr uint64_t k_default_engine_max_bytes = 8ULL << 30;

struct DefaultEngine {
  std::string command;         // `kvprof serve ...` with {host} and {port} placeholders
  std::string model_id;        // the catalog model, or the GGUF given
  std::filesystem::path gguf;  // the file served
  bool made_now = false;       // the GGUF was written by this call
  std::string library;         // the libllama found
};

// The default engine for `model` (empty: k_default_engine_model; a catalog id or a .gguf file),
// its dummy GGUF made under `output_dir`/.models/ when missing, libllama from `llama_lib` (empty:
// the usual search). A driver error when libllama is not installed (the caller then runs the
// simulator, saying so), a usage error for a model too big to serve here as a demonstration.
Expected<DefaultEngine> default_engine(const std::string& model,
                                       const std::filesystem::path& output_dir,
                                       const std::string& llama_lib);

}  // namespace kvprof::cli
