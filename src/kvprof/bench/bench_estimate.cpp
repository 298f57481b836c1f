// The planner's figures for a bench condition (see bench_estimate.hpp).
#include "kvprof/bench/bench_estimate.hpp"

#include "kvprof/engines/llamacpp/buffers.hpp"
#include "kvprof/model/resolve.hpp"

namespace kvprof::bench {

std::optional<model::ModelSpec> bench_model_spec(const BenchConfig& config) {
  auto spec = model::load_model(config.engine.model_path);
  if (!spec) return std::nullopt;
  return std::move(*spec);
}

std::optional<engines::LlamaCppSettings> run_planner_settings(const BenchConfig& config,
                                                              bool has_gpu, uint32_t n_ctx,
                                                              uint32_t n_seq_max) {
  const auto& e = config.engine;
  engines::LlamaCppSettings s;
  s.n_ctx = n_ctx;
  s.n_seq_max = n_seq_max;
  s.n_batch = e.n_batch;
  s.n_ubatch = e.n_ubatch;
  // auto: the CPU backend and CUDA both run flash attention.
  s.flash_attn = e.flash_attn != llama::FlashAttn::off;
  auto tk = engines::parse_cache_type(e.cache_type_k);
  auto tv = engines::parse_cache_type(e.cache_type_v);
  if (!tk || !tv) return std::nullopt;
  s.type_k = *tk;
  s.type_v = *tv;
  s.has_gpu = has_gpu;
  s.n_gpu_layers = e.n_gpu_layers;
  s.use_mmap = e.use_mmap;
  s.swa_full = e.swa_full;
  s.kv_unified = e.kv_unified;
  for (const auto& [pattern, buffer] : e.tensor_overrides)
    s.tensor_overrides.push_back({pattern, buffer});
  return s;
}

std::optional<uint32_t> planned_kv_cells(const BenchConfig& config, const model::ModelSpec& spec,
                                         bool has_gpu, uint32_t n_ctx, uint32_t n_seq_max) {
  const auto s = run_planner_settings(config, has_gpu, n_ctx, n_seq_max);
  if (!s) return std::nullopt;
  const auto plan = engines::plan_llamacpp(spec, *s);
  if (!plan || plan->kv_cells == 0) return std::nullopt;
  return plan->kv_cells;
}

nlohmann::json bench_plan_json(const BenchConfig& config, const model::ModelSpec* spec,
                               bool has_gpu, uint32_t n_ctx, uint32_t n_seq_max) {
  if (spec == nullptr || n_ctx == 0) return nullptr;
  const auto s = run_planner_settings(config, has_gpu, n_ctx, n_seq_max);
  if (!s) return nullptr;
  const auto plan = engines::plan_llamacpp(*spec, *s);
  if (!plan) return nullptr;
  const auto& p = *plan;
  return {{"weights_bytes",
           p.model_mapped_bytes + p.model_host_bytes + p.model_repack_bytes + p.model_gpu_bytes},
          {"kv_cache_bytes", p.kv.host_bytes + p.kv.gpu_bytes},
          {"compute_bytes", p.compute.host_bytes + p.compute.gpu_bytes},
          {"output_bytes", p.output_bytes},
          {"host_total_bytes", p.host_total_bytes},
          {"gpu_total_bytes", p.gpu_total_bytes},
          {"method", "kvprof estimate --engine llamacpp with the run's settings"}};
}

}  // namespace kvprof::bench
