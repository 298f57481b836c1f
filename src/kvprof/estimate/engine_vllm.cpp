// The vLLM V1 profile: requested = total * gpu_memory_utilization; KV = requested - weights -
// profile-run peak - non-torch increase (per worker); blocks per worker from the KV groups, the
// minimum over pipeline stages; CUDA graphs captured afterwards, outside the budget.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kvprof/estimate/activations.hpp"
#include "kvprof/estimate/engine_common.hpp"
#include "kvprof/estimate/vllm_kv.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::estimate {
namespace {

// vLLM's batch defaults for `vllm serve`: GPUs with >= 70 GiB that are not A100s get 8192
// batched tokens and 1024 sequences, others 2048 and 256 (engine/arg_utils.py).
void apply_vllm_defaults(EngineSettings& s, const model::ModelSpec& m, const gpu::GpuSpec& g) {
  const bool big =
      g.memory_bytes >= 70 * k_gib && to_lower(g.name).find("a100") == std::string::npos;
  if (!s.gpu_memory_utilization) s.gpu_memory_utilization = 0.9;
  if (!s.max_model_len)
    s.max_model_len = m.max_position_embeddings > 0 ? m.max_position_embeddings : 4096;
  if (!s.max_num_batched_tokens) s.max_num_batched_tokens = big ? 8192 : 2048;
  if (!s.max_num_seqs)
    s.max_num_seqs = std::min<uint32_t>(big ? 1024 : 256, *s.max_num_batched_tokens);
  if (!s.block_size) s.block_size = 16;
}

std::string gib2(uint64_t bytes) {
  return fmt::format("{:.2f}", bytes_to_gib(bytes));
}

std::string with_commas(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

}  // namespace

Expected<Estimate> estimate_vllm(const EstimateInput& in) {
  const model::ModelSpec& m = in.model;
  Estimate est;
  est.settings = in.settings;
  EngineSettings& s = est.settings;
  const bool block_size_set = s.block_size.has_value();
  apply_vllm_defaults(s, m, in.gpu);
  if (auto ok = validate_parallelism(m, s); !ok) return std::unexpected(ok.error());
  if (m.max_position_embeddings > 0 && *s.max_model_len > m.max_position_embeddings) {
    est.warnings.push_back(fmt::format(
        "--max-model-len {} exceeds the model's max_position_embeddings {}: vLLM refuses it "
        "unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
        *s.max_model_len, m.max_position_embeddings));
  }
  auto quant = resolve_quantization(m, s);
  if (!quant) return std::unexpected(quant.error());
  est.model_id = m.id;
  est.model_source = m.source;
  est.gpu = in.gpu;
  est.compute_dtype = resolve_compute_dtype(m, s);
  est.quantization = quant_name(*quant);
  const uint32_t tp = s.tensor_parallel_size;
  const uint32_t pp = s.pipeline_parallel_size;
  est.gpus_total = tp * pp * s.data_parallel_size;

  WeightOptions wopt;
  wopt.tp = tp;
  wopt.pp = pp;
  wopt.expert_shards = s.enable_expert_parallel ? tp * s.data_parallel_size : tp;
  wopt.compute_dtype = est.compute_dtype;
  wopt.quant = *quant;

  const uint64_t total = in.gpu.memory_bytes;
  const auto requested =
      static_cast<uint64_t>(std::floor(static_cast<double>(total) * *s.gpu_memory_utilization));
  std::vector<KvLayout> layouts;
  std::vector<int64_t> available;
  std::vector<WeightBreakdown> weights;
  std::vector<ActivationBreakdown> acts;
  std::vector<uint64_t> non_torch;
  uint64_t draft_weights = 0;
  std::optional<KvLayout> draft_layout;
  if (in.draft) {
    WeightOptions dopt = wopt;
    dopt.pp = 1;
    dopt.pp_rank = 0;
    dopt.quant = in.draft->quant;
    draft_weights = weights_per_rank(*in.draft, dopt).total_bytes;
    draft_layout = kv_layout(*in.draft, tp, 1, 0, s.kv_cache_dtype, est.compute_dtype);
  }
  for (uint32_t r = 0; r < pp; ++r) {
    wopt.pp_rank = r;
    weights.push_back(weights_per_rank(m, wopt));
    KvLayout layout = kv_layout(m, tp, pp, r, s.kv_cache_dtype, est.compute_dtype);
    const bool last = r + 1 == pp;
    if (draft_layout && last) {
      // The drafter's layers join the last stage's KV spec (ids after the target's).
      for (auto l : draft_layout->layers) {
        l.layer += m.n_layer;
        layout.kv_bytes_per_token += l.bytes_per_token;
        layout.layers.push_back(l);
      }
    }
    layouts.push_back(std::move(layout));
    ProfileRunShape shape;
    shape.tokens = *s.max_num_batched_tokens;
    shape.requests = std::min(*s.max_num_seqs, *s.max_num_batched_tokens);
    shape.tp = tp;
    shape.first_pp_rank = r == 0;
    shape.last_pp_rank = last;
    shape.pipeline = pp > 1;
    shape.compute_dtype = est.compute_dtype;
    acts.push_back(profile_run_peak(m, shape));
    non_torch.push_back(non_torch_bytes(tp, last));
    const uint64_t extra = last ? draft_weights : 0;
    int64_t avail = static_cast<int64_t>(requested) -
                    static_cast<int64_t>(weights.back().total_bytes) -
                    static_cast<int64_t>(acts.back().peak_bytes) -
                    static_cast<int64_t>(non_torch.back()) - static_cast<int64_t>(extra);
    if (s.kv_cache_memory_bytes) avail = static_cast<int64_t>(*s.kv_cache_memory_bytes);
    available.push_back(avail);
  }

  VllmKvParams kp;
  kp.block_size = *s.block_size;
  kp.block_size_set = block_size_set;
  kp.max_model_len = *s.max_model_len;
  kp.max_num_batched_tokens = *s.max_num_batched_tokens;
  kp.num_gpu_blocks_override = s.num_gpu_blocks_override;
  const VllmKvConfig kv = vllm_kv_config(layouts, available, kp);

  // Rank 0 is what vLLM's log shows for memory; the binding rank has the fewest blocks.
  const size_t binding = static_cast<size_t>(
      std::min_element(kv.blocks_per_worker.begin(), kv.blocks_per_worker.end()) -
      kv.blocks_per_worker.begin());
  est.binding_pp_rank = static_cast<uint32_t>(binding);
  est.weights = weights[0];
  est.kv_bytes_per_token = layouts[0].kv_bytes_per_token;
  est.state_bytes_per_request = layouts[0].state_bytes_per_request;
  est.kv_heads_replicated = layouts[0].kv_heads_replicated;

  const uint32_t graph_sets = (s.spec_runtime_control && s.num_speculative_tokens > 0) ? 2 : 1;
  MemoryBreakdown& mb = est.per_gpu;
  mb.weights_bytes = weights[0].total_bytes;
  mb.activation_bytes = acts[0].peak_bytes;
  mb.non_torch_bytes = non_torch[0];
  mb.kv_cache_bytes = kv.pool_bytes_per_worker[0];
  mb.cuda_graph_bytes =
      s.enforce_eager ? 0 : cuda_graph_bytes(m, weights[0].layers_on_rank, tp, graph_sets);
  if (in.draft && !s.enforce_eager && pp == 1) {
    mb.cuda_graph_bytes += cuda_graph_bytes(*in.draft, in.draft->n_layer, tp, graph_sets) / 2;
  }
  mb.draft_bytes = pp == 1 ? draft_weights : 0;
  mb.cuda_context_bytes = k_cuda_context_bytes;
  mb.total_bytes = mb.weights_bytes + mb.activation_bytes + mb.non_torch_bytes + mb.kv_cache_bytes +
                   mb.cuda_graph_bytes + mb.cuda_context_bytes + mb.draft_bytes;

  EngineReport& rep = est.engine_report;
  rep.available_kv_cache_bytes = static_cast<uint64_t>(std::max<int64_t>(available[0], 0));
  rep.kv_cache_tokens = kv.kv_cache_tokens;
  rep.num_gpu_blocks = kv.num_blocks;
  rep.max_concurrency = kv.max_concurrency;
  rep.block_size = kv.attention_block_size;
  rep.num_kv_cache_groups = static_cast<uint32_t>(kv.groups.size());
  rep.max_model_len = *s.max_model_len;
  rep.max_num_seqs = *s.max_num_seqs;
  rep.max_num_batched_tokens = *s.max_num_batched_tokens;
  rep.memory_fraction = *s.gpu_memory_utilization;
  rep.requested_memory_bytes = requested;
  const uint64_t non_kv = weights[0].total_bytes + acts[0].peak_bytes + non_torch[0];
  rep.log_lines = {
      fmt::format("Model loading took {} GiB memory", gib2(weights[0].total_bytes)),
      fmt::format(
          "Memory profiling takes ... Total non KV cache memory: {}GiB; torch peak memory "
          "increase: {}GiB; non-torch forward increase memory: {}GiB; weights memory: {}GiB.",
          gib2(non_kv), gib2(acts[0].peak_bytes), gib2(non_torch[0]), gib2(weights[0].total_bytes)),
      fmt::format("Available KV cache memory: {} GiB", gib2(rep.available_kv_cache_bytes)),
      fmt::format("GPU KV cache size: {} tokens", with_commas(rep.kv_cache_tokens)),
      fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x",
                  with_commas(rep.max_model_len), kv.max_concurrency),
  };
  if (!s.enforce_eager) {
    rep.log_lines.push_back(fmt::format("Graph capturing finished in ... secs, took {} GiB",
                                        gib2(mb.cuda_graph_bytes)));
  }

  // vLLM refuses to start when the budget is gone or one max-length request does not fit.
  bool starts = true;
  if (available[binding] <= 0 || kv.num_blocks == 0) {
    starts = false;
    est.warnings.push_back(fmt::format(
        "no memory left for the KV cache on {} (weights {} + activations {} + non-torch {} > {} "
        "x {}): vLLM fails with 'No available memory for the cache blocks'",
        pp > 1 ? fmt::format("pipeline rank {}", binding) : "the GPU",
        format_bytes(weights[binding].total_bytes), format_bytes(acts[binding].peak_bytes),
        format_bytes(non_torch[binding]), *s.gpu_memory_utilization, format_bytes(total)));
  } else if (kv.blocks_per_max_len_request > kv.num_blocks) {
    starts = false;
    uint64_t lo = 0;
    uint64_t hi = *s.max_model_len;
    while (lo < hi) {
      const uint64_t mid = (lo + hi + 1) / 2;
      if (vllm_blocks_per_request(kv, mid, *s.max_num_batched_tokens) <= kv.num_blocks) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    est.warnings.push_back(fmt::format(
        "one request of max_model_len {} tokens needs {} KV blocks but only {} fit: vLLM refuses "
        "to start; the largest max_model_len that fits is {}",
        *s.max_model_len, kv.blocks_per_max_len_request, kv.num_blocks, lo));
  }

  const uint64_t bytes_per_block = kv.num_blocks == 0 ? 0 : mb.kv_cache_bytes / kv.num_blocks;
  const Workload w = default_workload(in.workload, *s.max_model_len);
  const uint32_t mnbt = *s.max_num_batched_tokens;
  fill_rows(est, w, mb.kv_cache_bytes, /*paged=*/true, [kv, mnbt, bytes_per_block](uint64_t ctx) {
    return vllm_blocks_per_request(kv, ctx, mnbt) * bytes_per_block;
  });
  finish_verdict(est, starts);
  if (!m.warnings.empty()) est.confidence = "medium";
  if (m.extra_params > 0) {
    est.notes.push_back("vision/audio encoder profiling memory is not modelled separately");
  }
  est.notes.push_back(
      "vLLM V1: KV = total x gpu_memory_utilization - weights - profile-run peak - non-torch; "
      "CUDA graphs are captured after the KV cache, outside that budget");
  return est;
}

}  // namespace kvprof::estimate
