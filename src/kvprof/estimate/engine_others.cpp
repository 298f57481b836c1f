// TensorRT-LLM (PyTorch backend) and HF transformers profiles, and the dispatcher (SGLang's is
// in engine_sglang.cpp, llama.cpp's in engine_llamacpp.cpp). Each reproduces the engine's own
// budget rule; see the comment on each.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kvprof/estimate/activations.hpp"
#include "kvprof/estimate/engine_setup.hpp"
#include "kvprof/estimate/engine_version.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::estimate {
namespace {

uint64_t cdiv(uint64_t a, uint64_t b) {
  return b == 0 ? 0 : (a + b - 1) / b;
}

}  // namespace

// TensorRT-LLM (PyTorch backend, trtllm-serve, 1.x; KvCacheCreator in _torch/pyexecutor): after
// the weights load and an estimation run of dummy context requests (CUDA graphs captured), the KV
// cache takes free_gpu_memory_fraction (default 0.9) of the free memory, in blocks of 32 tokens;
// a two-model drafter's KV is part of each token's size.
Expected<Estimate> estimate_trtllm(const EstimateInput& in) {
  auto c = prepare_engine(in, in.settings);
  if (!c) return std::unexpected(c.error());
  Estimate& est = c->est;
  auto& s = est.settings;
  if (!s.gpu_memory_utilization) s.gpu_memory_utilization = 0.9;
  if (!s.max_num_batched_tokens) s.max_num_batched_tokens = 8192;
  if (!s.max_num_seqs) s.max_num_seqs = 2048;
  if (!s.block_size) s.block_size = 32;
  s.engine_version = modelled_engine_version(s);
  MemoryBreakdown& mb = est.per_gpu;
  mb.weights_bytes = est.weights.total_bytes;
  mb.cuda_context_bytes = k_cuda_context_bytes;
  const uint32_t graph_sets = (s.spec_runtime_control && s.num_speculative_tokens > 0) ? 2 : 1;
  // The estimation run: dummy context requests of up to max_seq_len - 1 tokens filling
  // max_num_tokens (_create_dummy_context_requests), each with one row of logits.
  const uint64_t request_tokens =
      std::clamp<uint64_t>(*s.max_model_len - 1, 1, *s.max_num_batched_tokens);
  const auto dummy_requests =
      static_cast<uint32_t>(cdiv(*s.max_num_batched_tokens, request_tokens));
  add_runtime_bytes(est, in.model, std::min(dummy_requests, *s.max_num_seqs), graph_sets);
  if (in.draft) {
    WeightOptions d;
    d.tp = s.tensor_parallel_size;
    d.compute_dtype = est.compute_dtype;
    d.quant = in.draft->quant;
    mb.draft_bytes = weights_per_rank(*in.draft, d).total_bytes;
    // A two-model drafter keeps its own KV in the same pool: each token costs both models'.
    const KvLayout draft_layout =
        kv_layout(*in.draft, s.tensor_parallel_size, 1, 0, s.kv_cache_dtype, est.compute_dtype);
    c->layout.kv_bytes_per_token += draft_layout.kv_bytes_per_token;
    est.kv_bytes_per_token = c->layout.kv_bytes_per_token;
  }
  const int64_t free =
      static_cast<int64_t>(in.gpu.memory_bytes) -
      static_cast<int64_t>(mb.cuda_context_bytes + mb.weights_bytes + mb.activation_bytes +
                           mb.non_torch_bytes + mb.cuda_graph_bytes + mb.draft_bytes);
  const uint64_t block_bytes = *s.block_size * c->layout.kv_bytes_per_token;
  const auto kv_budget = static_cast<uint64_t>(
      std::max<double>(0.0, static_cast<double>(free) * *s.gpu_memory_utilization));
  const uint64_t blocks = block_bytes == 0 ? 0 : kv_budget / block_bytes;
  mb.kv_cache_bytes = blocks * block_bytes;
  sum_total(mb);
  auto& rep = est.engine_report;
  report_settings(rep, s);
  rep.available_kv_cache_bytes = kv_budget;
  rep.num_gpu_blocks = blocks;
  rep.kv_cache_tokens = blocks * *s.block_size;
  rep.max_concurrency = static_cast<double>(blocks) / cdiv(*s.max_model_len, *s.block_size);
  // CUDA graphs: one per batch size and draft length warmed up; with speculation always on only
  // the draft length, with runtime control (max_concurrency) draft length 0 as well.
  if (!s.enforce_eager) {
    const auto n = static_cast<uint32_t>(
        trtllm_cuda_graph_sizes(std::min<uint32_t>(128, *s.max_num_seqs)).size());
    if (s.num_speculative_tokens > 0) {
      rep.cuda_graph_sets.emplace_back(fmt::format("draft_len_{}", s.num_speculative_tokens), n);
    }
    if (s.num_speculative_tokens == 0 || s.spec_runtime_control) {
      rep.cuda_graph_sets.emplace_back("draft_len_0", n);
    }
    for (const auto& set : rep.cuda_graph_sets)
      rep.cuda_graphs += set.second;
  }
  rep.log_lines = {
      fmt::format("Memory used after loading model weights (inside torch) in memory usage "
                  "profiling: {:.2f} GiB",
                  bytes_to_gib(mb.weights_bytes)),
      fmt::format("[MemUsageChange] Allocated {:.2f} GiB for max tokens in paged KV cache ({}).",
                  bytes_to_gib(mb.kv_cache_bytes), rep.kv_cache_tokens)};
  const Workload w = default_workload(in.workload, *s.max_model_len);
  const uint32_t block_tokens = *s.block_size;
  fill_rows(est, w, mb.kv_cache_bytes, true, [block_tokens, block_bytes](uint64_t ctx) {
    return cdiv(ctx, block_tokens) * block_bytes;
  });
  finish_engine(est, blocks > 0,
                "TensorRT-LLM: KV = free_gpu_memory_fraction x (free memory after weights, "
                "warm-up activations and CUDA graphs); tokens_per_block 32");
  return est;
}

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

Expected<Estimate> estimate(const EstimateInput& in) {
  if (in.model.n_layer == 0 || in.model.hidden_size == 0) {
    return fail(ErrorKind::input, "the model has no layers or hidden size");
  }
  if (in.gpu.memory_bytes == 0) return fail(ErrorKind::usage, "the GPU has no memory");
  auto est = [&]() -> Expected<Estimate> {
    switch (in.settings.engine) {
      case engines::Engine::vllm:
        return estimate_vllm(in);
      case engines::Engine::sglang:
        return estimate_sglang(in);
      case engines::Engine::trtllm:
        return estimate_trtllm(in);
      case engines::Engine::llamacpp:
        return estimate_llamacpp(in);
      case engines::Engine::hf:
        return estimate_hf(in);
      case engines::Engine::tgi:
      case engines::Engine::unknown:
        break;
    }
    return fail(ErrorKind::usage,
                fmt::format("kvprof does not plan {}",
                            engines::engine_row(in.settings.engine).display_name));
  }();
  // What reading the model found (a variant's entry, config and checkpoint disagreeing) comes
  // first: it qualifies every figure.
  if (est)
    est->warnings.insert(est->warnings.begin(), in.model.warnings.begin(), in.model.warnings.end());
  return est;
}

}  // namespace kvprof::estimate
