// HF transformers' memory plan (eager generate(), seed 001's breakdown).
#include "kvprof/engines/hf/hf.hpp"

#include <algorithm>

#include "kvprof/estimate/activations.hpp"
#include "kvprof/estimate/engine_setup.hpp"
#include "kvprof/model/dtype.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner below every engine

// HF transformers eager generate() (seed 001's breakdown): weights + KV for batch x sequence +
// peak activations of the prefill (MLP intermediates, attention scores without SDPA, last-token
// logits in fp32) + framework overhead (CUDA context, allocator).
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
  for (const uint64_t ctx : w.context_tokens) {
    if (ctx > *s.max_model_len) continue;  // rejected: never runs
    for (const uint32_t b : w.concurrency) {
      worst_kv = std::max(worst_kv, request_cache_bytes(c->layout, ctx) * b);
      // SDPA (transformers' default since 4.36) never holds the ctx x ctx scores: the prefill's
      // peak is the MLP's intermediate (gate, up, product) or the q/k/v projections of one layer.
      const double tokens = static_cast<double>(b) * static_cast<double>(ctx);
      const double mlp =
          tokens * std::max(m.intermediate_size, m.moe.expert_intermediate_size) * d * 3.0;
      const double qkv = tokens * (m.hidden_size + 2.0 * m.n_head_kv * m.head_dim) * d +
                         tokens * m.hidden_size * d;
      // Logits of the last position only (logits_to_keep), in fp32, and their softmax.
      const double logits = static_cast<double>(b) * m.vocab_size * 4.0 * 2.0;
      worst_act = std::max(worst_act, static_cast<uint64_t>(std::max(mlp, qkv) + logits));
    }
  }
  mb.kv_cache_bytes = worst_kv;
  mb.activation_bytes = worst_act;
  // Allocator fragmentation and library workspaces: ~4% of what torch holds.
  mb.non_torch_bytes = (mb.weights_bytes + worst_kv + worst_act) / 25 + (256ULL << 20);
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
