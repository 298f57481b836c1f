// llama.cpp's engine flags of `kvprof bench`, registered once and shared by every command that
// runs libllama in-process through bench (`bench`, `find-max --model X.gguf`): -c, --parallel,
// -b, --ubatch-size, --flash-attn, --cache-type-k/v, --n-gpu-layers, -t, --no-mmap, --swa-full,
// --seed, --llama-lib and --gpu-source.
#pragma once

#include <vector>

#include <optional>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "kvprof/bench/bench_config.hpp"
#include "kvprof/gpu/memory_source.hpp"

namespace kvprof::cli {

// What the flags hold before they are applied to the engine settings.
struct BenchEngineFlags {
  std::string flash_attn = "auto";
  bool no_mmap = false;
  bool swa_full = false;
  std::string gpu_source = "auto";           // auto | nvml | none
  std::vector<std::string> override_tensor;  // -ot PATTERN=BUFT[,...], each flag adding
  bool cpu_moe = false;                      // --cpu-moe
  std::optional<uint32_t> n_cpu_moe;         // --n-cpu-moe N
};

// Adds the engine flags to `cmd`, writing into `config` (its engine and library) and `flags`;
// the options go into the option group `group` when it is not empty. Returns where they went.
CLI::App* add_bench_engine_options(CLI::App* cmd, bench::BenchConfig& config,
                                   BenchEngineFlags& flags, const std::string& group = {});

// Applies `flags` to `config.engine` and checks what the flags name: the cache types, and that
// the model file exists (config.engine.model_path). Throws Fatal (exit 2) for a bad value or a
// missing GGUF.
void apply_bench_engine_flags(const BenchEngineFlags& flags, bench::BenchConfig& config);

// Whether any of the flags added to `where` was given on the command line.
bool any_bench_engine_option_given(const CLI::App* where);

}  // namespace kvprof::cli
