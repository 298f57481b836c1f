// HF transformers' memory plan (eager generate(), seed 001's breakdown).
#include "kvprof/engines/hf/hf.hpp"

#include <algorithm>

#include "kvprof/estimate/activations.hpp"
#include "kvprof/estimate/engine_setup.hpp"
#include "kvprof/model/dtype.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner below every engine

// Measured on an H200 with transformers 5.17 and torch 2.11 (docs/benchmarks.md, "Real GPU";
// tests/fixtures/gpu_h200/hf_inprocess.json): what generate() holds beside the weights and the
// cache, per prompt token of the prefill, and what torch's allocator and CUDA libraries add.
constexpr double k_hidden_states_gated = 4.0;     // residual, attention sum, norm, MLP input
constexpr double k_mlp_temporaries_gated = 3.0;   // act(gate), up, their product
constexpr double k_hidden_states_fc = 2.0;        // fc1/fc2 models (Phi-2): parallel attention
constexpr double k_mlp_temporaries_fc = 4.0;      // fc1's output and gelu_new's temporaries
constexpr double k_allocator_slack_share = 0.25;  // reserved less allocated, of KV + activations
constexpr uint64_t k_allocator_slack_bytes = 160ULL << 20;  // blocks left over after the load
constexpr uint64_t k_library_bytes = (190ULL << 20) + (32ULL << 20);  // cuBLAS, kernels; workspace

// HF transformers generate() with SDPA (seed 001's breakdown): weights + KV for batch x sequence
// + the prefill's peak activations (hidden states and MLP temporaries of every prompt token, the
// last position's logits in fp32) + torch's allocator slack, CUDA libraries and the context.
Expected<Estimate> estimate_hf(const EstimateInput& in) {
  auto c = prepare_engine(in, in.settings);
  if (!c) return std::unexpected(c.error());
  Estimate& est = c->est;
  auto& s = est.settings;
  const auto& m = in.model;
  MemoryBreakdown& mb = est.per_gpu;
  mb.weights_bytes = est.weights.total_bytes;
  mb.cuda_context_bytes = k_cuda_context_bytes;
  const Workload w = default_workload(in.workload, *s.max_model_len);
  uint64_t worst_kv = 0;
  uint64_t worst_act = 0;
  const double d = model::dtype_bits(est.compute_dtype) / 8.0;
  const bool gated = m.mlp_matrices >= 3;
  const double intermediate = std::max(m.intermediate_size, m.moe.expert_intermediate_size);
  const double per_token_bytes =
      d * (gated ? k_mlp_temporaries_gated * intermediate + k_hidden_states_gated * m.hidden_size
                 : k_mlp_temporaries_fc * intermediate + k_hidden_states_fc * m.hidden_size);
  for (const uint64_t ctx : w.context_tokens) {
    if (ctx > *s.max_model_len) continue;  // rejected: never runs
    for (const uint32_t b : w.concurrency) {
      worst_kv = std::max(worst_kv, request_cache_bytes(c->layout, ctx) * b);
      // SDPA (transformers' default since 4.36) never holds the ctx x ctx scores: the prefill's
      // peak is one layer's MLP with the hidden states around it, for every prompt token.
      const double tokens = static_cast<double>(b) * static_cast<double>(ctx);
      const double logits = static_cast<double>(b) * m.vocab_size * 4.0 * 2.0;
      worst_act = std::max(worst_act, static_cast<uint64_t>(tokens * per_token_bytes + logits));
    }
  }
  mb.kv_cache_bytes = worst_kv;
  mb.activation_bytes = worst_act;
  // torch's caching allocator keeps freed blocks (a quarter of what the forward passes took, on
  // an H200) beside the libraries' own memory outside it.
  mb.non_torch_bytes =
      static_cast<uint64_t>(k_allocator_slack_share * static_cast<double>(worst_kv + worst_act)) +
      k_allocator_slack_bytes + k_library_bytes;
  sum_total(mb);
  const uint64_t capacity = in.gpu.memory_bytes > mb.total_bytes - mb.kv_cache_bytes
                                ? in.gpu.memory_bytes - (mb.total_bytes - mb.kv_cache_bytes)
                                : 0;
  fill_rows(est, w, capacity, false, request_bytes(c->layout));
  est.engine_report.available_kv_cache_bytes = capacity;
  est.engine_report.max_model_len = *s.max_model_len;
  est.engine_report.kv_cache_tokens =
      c->layout.kv_bytes_per_token == 0 ? 0 : capacity / c->layout.kv_bytes_per_token;
  finish_engine(est, true,
                "HF transformers (SDPA attention): no paging; memory grows with batch x sequence",
                /*paged=*/false);
  return est;
}

}  // namespace kvprof::engines
