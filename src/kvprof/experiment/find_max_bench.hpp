// find-max trials on llama.cpp in-process: each step is one `kvprof bench` run (libllama in a
// worker process, its host memory and GPU memory sampled) of one condition — `concurrency`
// sequences of input + output tokens decoded together in one context of -c cells — in its own
// run folder under the search's folder. The engine has no scheduler: a sequence it cannot hold
// is not queued or preempted but refused (llama_decode finds no free KV cell), and the step
// fails saying the KV cache ran out; more sequences than a --parallel given fails as queued.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "kvprof/bench/bench_config.hpp"
#include "kvprof/experiment/find_max.hpp"
#include "kvprof/gpu/memory_source.hpp"
#include "kvprof/model/model_spec.hpp"

namespace kvprof::experiment {

struct BenchTrialSettings {
  bench::BenchConfig config;         // model, engine settings (-c given), library, seed
  std::filesystem::path output_dir;  // the search's folder: each step's run goes inside
  uint32_t input_len = 0;
  uint32_t output_len = 0;
  gpu::MemorySource* gpu = nullptr;  // NVML, or null on a machine without a GPU
  std::string gpu_name = "none";
  // This machine's RAM: --max-memory-frac compares the engine's peak RSS with it when the
  // engine ran on the CPU (on a GPU: GPU memory used / total).
  std::optional<uint64_t> host_total_bytes;
  std::function<void(const std::string&)> on_status;  // the running step's progress
};

// KV cells one sequence holds at its end: its prompt and every generated token but the last,
// which is sampled and never decoded.
uint64_t sequence_kv_cells(uint32_t input_len, uint32_t output_len);

// The planner's answer for llama.cpp: the KV cells it plans for -c (and --parallel, else one
// sequence) over the cells of one sequence, at most --parallel; none when it cannot plan.
std::optional<uint32_t> bench_estimated_start(const bench::BenchConfig& config,
                                              const model::ModelSpec& spec, bool has_gpu,
                                              uint32_t input_len, uint32_t output_len);

// A Trial running each step as a bench run. The step fails (a verdict, the search goes on) when
// the KV cache ran out, the context could not be made, the engine crashed or the step exceeds
// --parallel; the search ends with an error when llama.cpp refuses the model or the settings
// (input error) or the run folder cannot be made.
Trial make_bench_trial(BenchTrialSettings settings);

}  // namespace kvprof::experiment
