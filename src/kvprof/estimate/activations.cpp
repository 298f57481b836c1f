// Activation, non-torch and CUDA graph models. The shapes follow what vLLM V1 allocates in
// its profile run (gpu_model_runner.profile_run: a dummy forward of max_num_batched_tokens
// tokens over min(max_num_seqs, tokens) requests, then a dummy sampler run on their logits).
// Per-element constants were calibrated on published vLLM v0.19 H100 startup logs
// (shared/data/vllm_startup_public.jsonl) and are physical sizes, not per-model fits:
//  - sampler: logits in the model dtype, a float32 copy, and sort values/indices of the top-k/
//    top-p path alive together -> about (12.5 + logits dtype bytes) per (request, vocab entry);
//  - persistent: the dummy run's hidden states kept for the sampler (~1.15 copies of
//    tokens x hidden) plus ~50 MiB of runner buffers; fused-MoE workspaces
//    (tokens x top_k x (2*I/tp + hidden)) stay cached after the forward; with data parallel the
//    experts see every DP rank's tokens (gathered, then in chunks of 32,768);
//  - forward: the MLP's gate/up and activation outputs (3 x tokens x I/tp) and two hidden-sized
//    temporaries.
#include "kvprof/estimate/activations.hpp"

#include <algorithm>
#include <cmath>

namespace kvprof::estimate {
namespace {

constexpr double k_hidden_copies_kept = 1.15;
constexpr double k_fused_moe_chunk_tokens = 32768;  // VLLM_FUSED_MOE_CHUNK_SIZE's default
constexpr uint64_t k_runner_buffers_bytes = 50ULL << 20;

uint64_t largest_dense_intermediate(const model::ModelSpec& m) {
  bool any_dense = false;
  for (const auto& l : m.layers)
    any_dense = any_dense || !l.moe;
  if (m.layers.empty()) any_dense = true;
  uint64_t inter = any_dense ? m.intermediate_size : 0;
  if (m.is_moe() && m.moe.n_shared_expert > 0) {
    const uint64_t shared =
        static_cast<uint64_t>(m.moe.n_shared_expert) * (m.moe.shared_expert_intermediate_size > 0
                                                            ? m.moe.shared_expert_intermediate_size
                                                            : m.moe.expert_intermediate_size);
    inter = std::max(inter, shared);
  }
  return inter;
}

}  // namespace

ActivationModel activation_model(const model::ModelSpec& m) {
  ActivationModel a;
  a.hidden_size = m.hidden_size;
  a.vocab_size = m.vocab_size;
  a.moe = m.is_moe();
  a.expert_intermediate_size = m.moe.expert_intermediate_size;
  a.n_expert_used = m.moe.n_expert_used;
  a.dense_intermediate_size = largest_dense_intermediate(m);
  return a;
}

ActivationBreakdown profile_run_peak(const ActivationModel& m, const ProfileRunShape& s) {
  ActivationBreakdown a;
  const double d = model::dtype_bits(s.compute_dtype) / 8.0;
  const double tokens = s.tokens;
  const double hidden = static_cast<double>(m.hidden_size);
  const uint64_t tp = std::max<uint32_t>(s.tp, 1);

  double persistent = tokens * hidden * d * k_hidden_copies_kept + k_runner_buffers_bytes;
  if (s.pipeline) persistent += 2.0 * tokens * hidden * d;  // hidden + residual sent/received
  if (m.moe) {
    const double inter = static_cast<double>(m.expert_intermediate_size) / tp;
    double moe_tokens = tokens;
    if (s.dp > 1) {
      // Every DP rank's tokens, gathered (hidden states kept for the combine), and the fused-MoE
      // workspaces of the largest chunk of them (vLLM's all2all dispatch, fused_experts).
      const double gathered = tokens * s.dp;
      persistent += gathered * hidden * d;
      moe_tokens = std::max(tokens, std::min(gathered, k_fused_moe_chunk_tokens));
    }
    persistent += moe_tokens * std::max<uint32_t>(m.n_expert_used, 1) * (2.0 * inter + hidden) * d;
  }
  const double inter = static_cast<double>(m.dense_intermediate_size) / tp;
  const double forward = tokens * d * (3.0 * inter + 2.0 * hidden);
  double sampler = 0;
  if (s.last_pp_rank) {
    sampler = static_cast<double>(s.requests) * static_cast<double>(m.vocab_size) *
              (s.sampler_bytes_per_logit + d);
  }
  a.persistent_bytes = static_cast<uint64_t>(persistent);
  a.forward_bytes = static_cast<uint64_t>(forward);
  a.sampler_bytes = static_cast<uint64_t>(sampler);
  a.peak_bytes = a.persistent_bytes + std::max(a.forward_bytes, a.sampler_bytes);
  return a;
}

ActivationBreakdown profile_run_peak(const model::ModelSpec& m, const ProfileRunShape& s) {
  return profile_run_peak(activation_model(m), s);
}

uint64_t non_torch_bytes(uint32_t tp, bool last_pp_rank) {
  constexpr uint64_t k_base = 72ULL << 20;      // cuBLAS/cuBLASLt handles and workspaces
  constexpr uint64_t k_sampler = 184ULL << 20;  // sampling kernels' workspaces (last rank)
  return non_torch_bytes(tp, last_pp_rank, k_base, k_sampler);
}

uint64_t tp_comm_bytes(uint32_t tp) {
  constexpr uint64_t k_tp = 1894ULL << 20;  // NCCL + custom all-reduce IPC buffers
  if (tp <= 1) return 0;
  return k_tp + (static_cast<uint64_t>(std::log2(tp)) - 1) * (32ULL << 20);
}

uint64_t non_torch_bytes(uint32_t tp, bool last_pp_rank, uint64_t base_bytes,
                         uint64_t sampler_bytes) {
  return base_bytes + (last_pp_rank ? sampler_bytes : 0) + tp_comm_bytes(tp);
}

uint64_t cuda_graph_bytes(const model::ModelSpec& m, uint32_t n_layers_on_rank, uint32_t tp,
                          uint32_t graph_sets) {
  // Calibrated on vLLM v0.19 (51 capture sizes, FULL_AND_PIECEWISE): a fixed pool, a cost per
  // layer (graph nodes), a cost growing with the hidden width (the largest graph's buffers),
  // and the MoE routing kernels per active expert.
  const double gib = static_cast<double>(1ULL << 30);
  double g = 0.28 + 0.0105 * n_layers_on_rank + 0.068 * (m.hidden_size / 1000.0);
  if (m.is_moe()) {
    uint32_t moe_layers = 0;
    for (const auto& l : m.layers)
      moe_layers += l.moe ? 1 : 0;
    moe_layers = m.n_layer > 0 ? moe_layers * n_layers_on_rank / m.n_layer : 0;
    g += 0.005 * moe_layers * m.moe.n_expert_used;
  }
  if (tp > 1) g *= std::max(0.6, 1.0 - 0.1 * std::log2(static_cast<double>(tp)));
  return static_cast<uint64_t>(g * gib * std::max<uint32_t>(graph_sets, 1));
}

std::vector<uint32_t> vllm_cuda_graph_sizes(uint32_t max_num_seqs) {
  return vllm_cuda_graph_sizes(std::min<uint32_t>(std::max<uint32_t>(max_num_seqs, 1) * 2, 512),
                               true);
}

std::vector<uint32_t> vllm_cuda_graph_sizes(uint32_t max_size, bool step16_above_256) {
  std::vector<uint32_t> sizes;
  for (uint32_t s : {1U, 2U, 4U}) {
    if (s <= max_size) sizes.push_back(s);
  }
  const uint32_t step8_end = step16_above_256 ? 256 : max_size + 1;
  for (uint32_t s = 8; s < step8_end && s <= max_size; s += 8)
    sizes.push_back(s);
  for (uint32_t s = 256; step16_above_256 && s <= max_size; s += 16)
    sizes.push_back(s);
  return sizes;
}

uint32_t vllm_cuda_graph_count(const std::vector<uint32_t>& sizes, uint32_t max_num_seqs,
                               uint32_t graph_sets) {
  uint32_t n = 0;
  for (uint32_t s : sizes)
    n += s <= max_num_seqs ? 2 : 1;
  return n * std::max<uint32_t>(graph_sets, 1);
}

std::vector<uint32_t> trtllm_cuda_graph_sizes(uint32_t max_batch_size) {
  std::vector<uint32_t> sizes;
  for (uint32_t s = 1; s < 32 && s <= max_batch_size; ++s)
    sizes.push_back(s);
  for (uint32_t s : {32U, 64U, 128U}) {
    if (s <= max_batch_size) sizes.push_back(s);
  }
  // Powers of two from 2^8 up to (not including) 2^floor(log2(max_batch_size)).
  for (uint64_t s = 256; s * 2 <= max_batch_size; s *= 2)
    sizes.push_back(static_cast<uint32_t>(s));
  return sizes;
}

}  // namespace kvprof::estimate
