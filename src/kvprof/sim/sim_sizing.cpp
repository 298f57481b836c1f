// serve-sim sized by the planner (see sim_sizing.hpp).
#include "kvprof/sim/sim_sizing.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kvprof/engines/registry.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/resolve.hpp"

namespace kvprof::sim {

Expected<void> apply_estimate(const estimate::Estimate& est, SimConfig& config) {
  const auto& r = est.engine_report;
  const auto& mem = est.per_gpu;
  if (r.num_gpu_blocks == 0 || mem.kv_cache_bytes == 0) {
    return fail(ErrorKind::usage,
                fmt::format("{} leaves no memory for the KV cache on {}", est.model_id,
                            est.gpu.name.empty() ? est.gpu.id : est.gpu.name));
  }
  config.num_gpu_blocks = static_cast<uint32_t>(std::min<uint64_t>(r.num_gpu_blocks, 1U << 26));
  config.block_size = std::max<uint32_t>(1, r.block_size);
  config.max_num_seqs = std::max<uint32_t>(1, r.max_num_seqs);
  config.max_num_batched_tokens = std::max<uint32_t>(1, r.max_num_batched_tokens);
  const uint64_t capacity_tokens = uint64_t{config.num_gpu_blocks} * config.block_size;
  config.max_model_len =
      static_cast<uint32_t>(std::min<uint64_t>({r.max_model_len, capacity_tokens, 1U << 30}));
  config.total_bytes = est.gpu.memory_bytes;
  config.weights_bytes = mem.weights_bytes + mem.draft_bytes;
  config.kv_bytes_per_block = std::max<uint64_t>(1, mem.kv_cache_bytes / r.num_gpu_blocks);
  config.cuda_graph_bytes = mem.cuda_graph_bytes;
  config.non_torch_bytes = mem.non_torch_bytes + mem.cuda_context_bytes;
  config.activation_bytes_per_token = mem.activation_bytes / config.max_num_batched_tokens;
  return {};
}

Expected<std::optional<estimate::Estimate>> estimate_for_sim(const SimFlags& flags) {
  auto spec = model::load_model(flags.model);
  if (!spec) {
    if (spec.error().kind == ErrorKind::not_found) return std::optional<estimate::Estimate>{};
    return std::unexpected(spec.error().with_context("--model"));
  }
  estimate::EstimateInput in;
  in.model = std::move(*spec);
  auto gpu = gpu::find_gpu(flags.gpu.empty() ? std::string("H100") : flags.gpu);
  if (!gpu) return std::unexpected(gpu.error());
  in.gpu = *gpu;
  auto& s = in.settings;
  s.engine = engines::Engine::vllm;
  s.block_size = flags.block_size;
  s.max_num_seqs = flags.max_num_seqs;
  s.max_num_batched_tokens = flags.max_num_batched_tokens;
  if (flags.max_model_len) s.max_model_len = *flags.max_model_len;
  s.gpu_memory_utilization = flags.gpu_memory_utilization;
  s.tensor_parallel_size = std::max<uint32_t>(1, flags.tensor_parallel_size);
  auto est = engines::plan(in);
  if (!est) return std::unexpected(est.error().with_context("sizing the simulation"));
  return std::optional<estimate::Estimate>(std::move(*est));
}

}  // namespace kvprof::sim
