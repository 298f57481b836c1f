// vLLM V1's budget: requested = total * gpu_memory_utilization; KV = requested - weights -
// profile-run peak - non-torch increase (per worker); blocks per worker from the KV groups, the
// minimum over pipeline stages; CUDA graphs captured afterwards, outside the budget.
#include "kvprof/engines/vllm/budget.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner below every engine

namespace {

// Releases without per-kind KV groups give sliding-window and chunked layers a full cache.
void treat_windows_as_full(KvLayout& layout) {
  for (auto& l : layout.layers) {
    if (l.kind == model::AttentionKind::sliding || l.kind == model::AttentionKind::chunked) {
      l.kind = model::AttentionKind::full;
      l.window_tokens = 0;
    }
  }
}

}  // namespace

// vLLM's batch defaults for `vllm serve` (engine/arg_utils.py).
bool vllm_large_gpu(const gpu::GpuSpec& g, const VllmVersionRules& r) {
  const std::string name = to_lower(g.name);
  switch (r.batch_defaults) {
    case VllmBatchDefaults::fixed:
      return false;
    case VllmBatchDefaults::h100_by_name:
      return name.find("h100") != std::string::npos || name.find("h200") != std::string::npos;
    case VllmBatchDefaults::by_memory:
      return g.memory_bytes >= 70 * k_gib;
    case VllmBatchDefaults::by_memory_not_a100:
      break;
  }
  return g.memory_bytes >= 70 * k_gib && name.find("a100") == std::string::npos;
}

uint64_t vllm_default_max_model_len(const model::ModelSpec& m) {
  return m.max_position_embeddings > 0 ? m.max_position_embeddings : 4096;
}

uint32_t vllm_default_max_num_batched_tokens(const VllmVersionRules& r, bool large_gpu,
                                             uint64_t max_model_len) {
  if (r.v0_engine) {
    if (max_model_len > r.v0_unchunked_max_model_len) return r.default_max_num_batched_tokens;
    return static_cast<uint32_t>(std::max<uint64_t>(max_model_len, 2048));
  }
  if (r.batch_defaults == VllmBatchDefaults::fixed) return r.default_max_num_batched_tokens;
  return large_gpu ? 8192 : 2048;
}

uint32_t vllm_default_max_num_seqs(const VllmVersionRules& r, bool large_gpu,
                                   uint32_t max_num_batched_tokens) {
  uint32_t seqs = r.default_max_num_seqs;
  if (r.batch_defaults == VllmBatchDefaults::h100_by_name ||
      (large_gpu && r.batch_defaults != VllmBatchDefaults::fixed)) {
    seqs = 1024;
  }
  return std::min(seqs, max_num_batched_tokens);
}

uint32_t vllm_cuda_graph_count(const VllmVersionRules& r, uint32_t max_num_seqs,
                               uint32_t graph_sets) {
  if (r.graph_sizes_step16_above_256 && r.graph_sizes_capped_by_seqs && r.full_decode_graphs) {
    return estimate::vllm_cuda_graph_count(vllm_cuda_graph_sizes(max_num_seqs), max_num_seqs,
                                           graph_sets);
  }
  const uint32_t max_size = r.graph_sizes_capped_by_seqs
                                ? std::min(r.max_capture_size, max_num_seqs)
                                : r.max_capture_size;
  const auto sizes = vllm_cuda_graph_sizes(max_size, r.graph_sizes_step16_above_256);
  const uint32_t n = r.full_decode_graphs ? estimate::vllm_cuda_graph_count(sizes, max_num_seqs, 1)
                                          : static_cast<uint32_t>(sizes.size());
  return n * std::max<uint32_t>(graph_sets, 1);
}

void apply_vllm_defaults(EngineSettings& s, const model::ModelSpec& m, const gpu::GpuSpec& g,
                         const VllmVersionRules& r) {
  const bool large = vllm_large_gpu(g, r);
  if (!s.gpu_memory_utilization) s.gpu_memory_utilization = r.default_gpu_memory_utilization;
  if (!s.max_model_len) s.max_model_len = vllm_default_max_model_len(m);
  if (!s.max_num_batched_tokens) {
    s.max_num_batched_tokens = vllm_default_max_num_batched_tokens(r, large, *s.max_model_len);
  }
  if (!s.max_num_seqs) {
    s.max_num_seqs = vllm_default_max_num_seqs(r, large, *s.max_num_batched_tokens);
  }
  // DeepSeek sparse attention's kernels (FlashMLA-sparse, the indexer) take blocks of 64 only.
  if (!s.block_size) s.block_size = m.dsa.enabled() ? 64 : k_vllm_default_block_size;
}

Mxfp4Padding vllm_mxfp4_padding(const gpu::GpuSpec& g) {
  if (g.vendor == "amd") return g.arch == "cdna4" ? Mxfp4Padding{256, 256} : Mxfp4Padding{128, 128};
  if (g.compute_capability >= 100 && g.compute_capability < 110) return {256, 256};
  if (g.compute_capability == 90) return {64, 1};
  if (g.compute_capability == 0) return {};  // a GPU known only by its memory
  return {128, 256};
}

VllmSplitPlan vllm_split_plan(const model::ModelSpec& m, const model::ModelSpec* draft,
                              const EngineSettings& s, model::DType compute_dtype,
                              const model::Quantization& quant, bool block_size_set,
                              const VllmVersionRules& rules, Mxfp4Padding mxfp4) {
  VllmSplitPlan plan;
  plan.rules = &rules;
  plan.tp = s.tensor_parallel_size;
  plan.pp = s.pipeline_parallel_size;
  plan.dp = std::max(1U, s.data_parallel_size);
  plan.compute_dtype = compute_dtype;
  const uint32_t tp = plan.tp;
  const uint32_t pp = plan.pp;
  WeightOptions wopt;
  wopt.tp = tp;
  wopt.pp = pp;
  // The experts' group spans every GPU of the deployment (fused_moe/config.py,
  // FusedMoEParallelConfig.make): whole experts over tp x dp with --enable-expert-parallel, else
  // each expert's matrices over tp x dp; attention stays within each DP rank's TP group.
  if (s.enable_expert_parallel) {
    wopt.expert_parallel = tp * s.data_parallel_size;
    wopt.expert_tp = 1;
  } else {
    wopt.expert_tp = tp * s.data_parallel_size;
  }
  wopt.compute_dtype = compute_dtype;
  wopt.quant = quant;

  std::optional<KvLayout> draft_layout;
  if (draft) {
    WeightOptions dopt = wopt;
    dopt.pp = 1;
    dopt.pp_rank = 0;
    dopt.quant = draft->quant;
    plan.draft_weights_bytes = weights_per_rank(*draft, dopt).total_bytes;
    draft_layout = kv_layout(*draft, tp, 1, 0, s.kv_cache_dtype, compute_dtype);
  }
  for (uint32_t r = 0; r < pp; ++r) {
    wopt.pp_rank = r;
    plan.weights.push_back(weights_per_rank(m, wopt));
    auto& w = plan.weights.back();
    if (const uint64_t pad = mxfp4_padding_bytes(m, wopt, mxfp4); pad > 0) {
      w.expert_bytes += pad;
      w.total_bytes += pad;
    }
    // --cpu-offload-gb: each decoder layer's parameters move to pinned host memory, in order,
    // until the GiB per GPU are reached (models/utils.py maybe_offload_to_cpu; whole parameters,
    // so up to one more than asked); embeddings, the LM head and buffers stay.
    if (s.cpu_offload_bytes) {
      const uint64_t decoder = w.total_bytes - w.embedding_bytes - w.lm_head_bytes - w.buffer_bytes;
      w.offloaded_bytes = std::min(*s.cpu_offload_bytes, decoder);
      w.total_bytes -= w.offloaded_bytes;
    }
    KvLayout layout = kv_layout(m, tp, pp, r, s.kv_cache_dtype, compute_dtype);
    if (!rules.hybrid_kv_groups) treat_windows_as_full(layout);
    const bool last = r + 1 == pp;
    if (draft_layout && last) {
      // The drafter's layers join the last stage's KV spec (ids after the target's).
      for (auto l : draft_layout->layers) {
        l.layer += m.n_layer;
        layout.kv_bytes_per_token += l.bytes_per_token;
        layout.layers.push_back(l);
      }
    }
    plan.layouts.push_back(std::move(layout));
    plan.non_torch_bytes.push_back(
        non_torch_bytes(tp, last, rules.non_torch_base_bytes, rules.non_torch_sampler_bytes));
  }
  plan.tp_comm_bytes = tp_comm_bytes(tp);
  plan.kv = vllm_kv_geometry(
      plan.layouts, s.block_size.value_or(m.dsa.enabled() ? 64 : k_vllm_default_block_size),
      block_size_set);

  const uint32_t graph_sets = (s.spec_runtime_control && s.num_speculative_tokens > 0) ? 2 : 1;
  if (!s.enforce_eager) {
    plan.cuda_graph_bytes = cuda_graph_bytes(m, plan.weights[0].layers_on_rank, tp, graph_sets);
    if (draft && pp == 1) {
      plan.cuda_graph_bytes += cuda_graph_bytes(*draft, draft->n_layer, tp, graph_sets) / 2;
    }
    if (rules.cuda_graph_scale != 1.0) {
      plan.cuda_graph_bytes = static_cast<uint64_t>(static_cast<double>(plan.cuda_graph_bytes) *
                                                    rules.cuda_graph_scale);
    }
  }
  plan.draft_bytes = pp == 1 ? plan.draft_weights_bytes : 0;
  return plan;
}

VllmBudget vllm_budget(const VllmSplitPlan& plan, const ActivationModel& act,
                       const VllmBatch& batch) {
  VllmBudget b;
  b.requested_bytes = static_cast<uint64_t>(
      std::floor(static_cast<double>(batch.gpu_memory_bytes) * batch.gpu_memory_utilization));
  ProfileRunShape shape;
  shape.tokens = batch.max_num_batched_tokens;
  shape.requests = std::min(batch.max_num_seqs, batch.max_num_batched_tokens);
  shape.tp = plan.tp;
  shape.dp = plan.dp;
  shape.pipeline = plan.pp > 1;
  shape.compute_dtype = plan.compute_dtype;
  shape.sampler_bytes_per_logit = plan.rules->sampler_bytes_per_logit;
  // Older releases measured the used memory after profiling, CUDA context included.
  const uint64_t context = plan.rules->charges_cuda_context ? k_cuda_context_bytes : 0;
  b.charged_context_bytes = context;
  // From v0.20 the profiling's dummy capture estimates the graphs and the budget pays for them.
  const uint64_t graphs = plan.rules->budget_holds_cuda_graphs ? plan.cuda_graph_bytes : 0;
  b.charged_cuda_graph_bytes = graphs;
  uint64_t min_blocks = 0;
  for (uint32_t r = 0; r < plan.pp; ++r) {
    const bool last = r + 1 == plan.pp;
    shape.first_pp_rank = r == 0;
    shape.last_pp_rank = last;
    const uint64_t peak = profile_run_peak(act, shape).peak_bytes;
    const uint64_t extra = last ? plan.draft_weights_bytes : 0;
    const uint64_t non_torch = plan.non_torch_bytes[r] - (batch.pcie ? plan.tp_comm_bytes : 0);
    int64_t avail = static_cast<int64_t>(b.requested_bytes) -
                    static_cast<int64_t>(plan.weights[r].total_bytes) - static_cast<int64_t>(peak) -
                    static_cast<int64_t>(non_torch) - static_cast<int64_t>(extra) -
                    static_cast<int64_t>(context) - static_cast<int64_t>(graphs);
    if (batch.kv_cache_memory_bytes) avail = static_cast<int64_t>(*batch.kv_cache_memory_bytes);
    const uint64_t blocks = vllm_worker_blocks(plan.kv, r, avail);
    if (r == 0) {
      b.available_bytes = avail;
      b.activation_bytes = peak;
      b.non_torch_bytes = non_torch;
    }
    if (r == 0 || blocks < min_blocks) {
      min_blocks = blocks;
      b.binding_rank = r;
      b.binding_available_bytes = avail;
      b.binding_activation_bytes = peak;
    }
  }
  // The smallest worker decides; an override replaces it; attention-free models keep only the
  // null block.
  b.num_blocks = min_blocks;
  if (batch.num_gpu_blocks_override) b.num_blocks = *batch.num_gpu_blocks_override;
  if (plan.kv.groups.empty()) b.num_blocks = 1;

  VllmKvParams kp;
  kp.max_model_len = batch.max_model_len;
  kp.max_num_batched_tokens = batch.max_num_batched_tokens;
  b.kv = vllm_kv_figures(plan.kv, b.num_blocks, kp);
  b.kv_cache_bytes = plan.kv.block_bytes_per_worker[0] * b.num_blocks;
  // Known from the geometry even when no block fits, so a workload's need is always computed.
  b.bytes_per_block =
      plan.kv.block_bytes_per_worker.empty() ? 0 : plan.kv.block_bytes_per_worker[0];
  b.total_bytes = plan.weights[0].total_bytes + b.activation_bytes + b.non_torch_bytes +
                  b.kv_cache_bytes + plan.cuda_graph_bytes + k_cuda_context_bytes +
                  plan.draft_bytes;
  // vLLM refuses to start when the budget is gone or one max-length request does not fit.
  b.starts = b.binding_available_bytes > 0 && b.num_blocks > 0 &&
             b.kv.blocks_per_max_len_request <= b.num_blocks;
  return b;
}

uint64_t vllm_request_kv_bytes(const VllmKvGeometry& g, uint64_t bytes_per_block, uint64_t tokens,
                               uint32_t max_num_batched_tokens) {
  return vllm_blocks_per_request(g, tokens, max_num_batched_tokens) * bytes_per_block;
}

}  // namespace kvprof::engines
