// What kvprof's llama.cpp planner predicted for each bench condition, written beside what
// llama.cpp reported and what the process grew by, so a bench run checks the plan.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

#include "kvprof/bench/bench_config.hpp"
#include "kvprof/engines/llamacpp/buffers.hpp"
#include "kvprof/model/model_spec.hpp"

namespace kvprof::bench {

// The model of the run as the planner reads it (its GGUF header); nullopt when unreadable.
std::optional<model::ModelSpec> bench_model_spec(const BenchConfig& config);

// The planner's settings for the run's engine settings in a context of `n_ctx` cells and
// `n_seq_max` sequences; none for a cache type the planner does not know.
std::optional<engines::LlamaCppSettings> run_planner_settings(const BenchConfig& config,
                                                              bool has_gpu, uint32_t n_ctx,
                                                              uint32_t n_seq_max);

// KV cells the planner gives a context of `n_ctx` cells and `n_seq_max` sequences under the
// run's settings (llama.cpp pads to 256 per stream); none when it cannot plan the model.
std::optional<uint32_t> planned_kv_cells(const BenchConfig& config, const model::ModelSpec& spec,
                                         bool has_gpu, uint32_t n_ctx, uint32_t n_seq_max);

// The plan for a context of `n_ctx` cells and `n_seq_max` sequences under the run's settings:
// {weights_bytes, kv_cache_bytes, compute_bytes, host_total_bytes, ...}; null without a model.
nlohmann::json bench_plan_json(const BenchConfig& config, const model::ModelSpec* spec,
                               bool has_gpu, uint32_t n_ctx, uint32_t n_seq_max);

}  // namespace kvprof::bench
