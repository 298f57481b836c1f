// SGLang, TensorRT-LLM (PyTorch backend) and HF transformers profiles, and the dispatcher
// (llama.cpp's is in engine_llamacpp.cpp). Each reproduces the engine's own budget rule; see the
// comment on each.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kvprof/estimate/activations.hpp"
#include "kvprof/estimate/engine_common.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::estimate {
namespace {

uint64_t cdiv(uint64_t a, uint64_t b) {
  return b == 0 ? 0 : (a + b - 1) / b;
}

// Shared set-up: validation, dtype, quantization, weights and KV layout of rank 0.
struct Common {
  Estimate est;
  model::Quantization quant;
  KvLayout layout;
};

Expected<Common> prepare(const EstimateInput& in, EngineSettings settings) {
  Common c;
  c.est.settings = std::move(settings);
  const auto& m = in.model;
  auto& s = c.est.settings;
  if (auto ok = validate_parallelism(m, s); !ok) return std::unexpected(ok.error());
  auto quant = resolve_quantization(m, s);
  if (!quant) return std::unexpected(quant.error());
  c.quant = *quant;
  c.est.model_id = m.id;
  c.est.model_source = m.source;
  c.est.gpu = in.gpu;
  c.est.compute_dtype = resolve_compute_dtype(m, s);
  c.est.quantization = quant_name(c.quant);
  c.est.gpus_total = s.tensor_parallel_size * s.pipeline_parallel_size * s.data_parallel_size;
  if (!s.max_model_len) {
    s.max_model_len = m.max_position_embeddings > 0 ? m.max_position_embeddings : 4096;
  }
  WeightOptions w;
  w.tp = s.tensor_parallel_size;
  w.pp = s.pipeline_parallel_size;
  w.expert_shards = s.enable_expert_parallel ? w.tp * s.data_parallel_size : w.tp;
  w.compute_dtype = c.est.compute_dtype;
  w.quant = c.quant;
  c.est.weights = weights_per_rank(m, w);
  c.layout = kv_layout(m, w.tp, w.pp, 0, s.kv_cache_dtype, c.est.compute_dtype);
  c.est.kv_bytes_per_token = c.layout.kv_bytes_per_token;
  c.est.state_bytes_per_request = c.layout.state_bytes_per_request;
  c.est.kv_heads_replicated = c.layout.kv_heads_replicated;
  if (!m.warnings.empty()) c.est.confidence = "medium";
  return c;
}

uint64_t sum_total(MemoryBreakdown& mb) {
  mb.total_bytes = mb.weights_bytes + mb.kv_cache_bytes + mb.activation_bytes +
                   mb.cuda_graph_bytes + mb.non_torch_bytes + mb.cuda_context_bytes +
                   mb.draft_bytes;
  return mb.total_bytes;
}

// Per-request cache with sliding layers bounded by their window.
std::function<uint64_t(uint64_t)> request_bytes(const KvLayout& layout) {
  return [layout](uint64_t ctx) { return request_cache_bytes(layout, ctx); };
}

// Into est.per_gpu: activations of a profile run of max_num_batched_tokens over `requests`,
// non-torch memory, and `graph_sets` sets of CUDA graphs (none with enforce_eager).
void add_runtime_bytes(Estimate& est, const model::ModelSpec& m, uint32_t requests,
                       uint32_t graph_sets) {
  const auto& s = est.settings;
  MemoryBreakdown& mb = est.per_gpu;
  ProfileRunShape shape;
  shape.tokens = *s.max_num_batched_tokens;
  shape.requests = requests;
  shape.tp = s.tensor_parallel_size;
  shape.compute_dtype = est.compute_dtype;
  mb.activation_bytes = profile_run_peak(m, shape).peak_bytes;
  mb.non_torch_bytes = non_torch_bytes(s.tensor_parallel_size, true);
  mb.cuda_graph_bytes = s.enforce_eager ? 0
                                        : cuda_graph_bytes(m, est.weights.layers_on_rank,
                                                           s.tensor_parallel_size, graph_sets);
}

// The engine-report fields taken from the settings in effect (all set by the caller); the block
// size is 1 token when unset.
void report_settings(EngineReport& rep, const EngineSettings& s) {
  rep.block_size = s.block_size.value_or(1);
  rep.max_model_len = *s.max_model_len;
  rep.max_num_seqs = *s.max_num_seqs;
  rep.max_num_batched_tokens = *s.max_num_batched_tokens;
  rep.memory_fraction = *s.gpu_memory_utilization;
}

// Sets the verdict, lowers "high" confidence to "medium" (the engine's rule is reproduced, not
// measured) and adds the note stating that rule.
void finish_engine(Estimate& est, bool engine_starts, std::string rule_note, bool paged = true) {
  finish_verdict(est, engine_starts, paged);
  // Weights that do not load: the engine prints none of its memory figures.
  if (est.start_failure == "loading weights") est.engine_report.log_lines.clear();
  if (est.confidence == "high") est.confidence = "medium";
  est.notes.push_back(std::move(rule_note));
}

}  // namespace

// SGLang: mem_fraction_static (default from GPU memory and TP/PP size: the reserve is
// (9.5 + parallel/2) GiB on 80 GB cards, (12 + parallel/2) GiB on H20/H200, 32 GiB above
// 160 GiB); KV tokens = (free after weights - total * (1 - fraction)) / cell size.
Expected<Estimate> estimate_sglang(const EstimateInput& in) {
  auto c = prepare(in, in.settings);
  if (!c) return std::unexpected(c.error());
  Estimate& est = c->est;
  auto& s = est.settings;
  const uint64_t total = in.gpu.memory_bytes;
  const double gpu_gib = bytes_to_gib(total);
  const double parallel = s.tensor_parallel_size * s.pipeline_parallel_size;
  if (!s.gpu_memory_utilization) {
    double reserved_gib = 0;
    if (gpu_gib < 35) {
      reserved_gib = 3.0 + parallel / 2;
    } else if (gpu_gib < 60) {
      reserved_gib = 6.0 + parallel / 2;
    } else if (gpu_gib < 90) {
      reserved_gib = 9.5 + parallel / 2;
    } else if (gpu_gib < 160) {
      reserved_gib = 12.0 + parallel / 2;
    } else {
      reserved_gib = 32.0;
    }
    if (!s.speculative_model.empty()) reserved_gib += 2.0;
    s.gpu_memory_utilization = std::round((gpu_gib - reserved_gib) / gpu_gib * 1000.0) / 1000.0;
  }
  const uint32_t chunked = gpu_gib < 35 ? 2048 : (gpu_gib < 160 ? 8192 : 16384);
  if (!s.max_num_batched_tokens) s.max_num_batched_tokens = chunked;
  if (!s.max_num_seqs) s.max_num_seqs = gpu_gib < 35 ? 48 : 160;  // cuda_graph_max_bs
  MemoryBreakdown& mb = est.per_gpu;
  mb.weights_bytes = est.weights.total_bytes;
  mb.cuda_context_bytes = k_cuda_context_bytes;
  const int64_t free_after_load = static_cast<int64_t>(total) -
                                  static_cast<int64_t>(mb.cuda_context_bytes) -
                                  static_cast<int64_t>(mb.weights_bytes);
  const int64_t rest =
      free_after_load -
      static_cast<int64_t>(std::llround(total * (1.0 - *s.gpu_memory_utilization)));
  const uint64_t cell = c->layout.kv_bytes_per_token;
  const uint64_t tokens = rest > 0 && cell > 0 ? static_cast<uint64_t>(rest) / cell : 0;
  mb.kv_cache_bytes = tokens * cell;
  add_runtime_bytes(est, in.model, *s.max_num_seqs, 1);
  sum_total(mb);
  auto& rep = est.engine_report;
  report_settings(rep, s);
  rep.available_kv_cache_bytes = mb.kv_cache_bytes;
  rep.kv_cache_tokens = tokens;
  rep.num_gpu_blocks = tokens;  // page_size 1
  rep.max_concurrency = *s.max_model_len > 0 ? static_cast<double>(tokens) / *s.max_model_len : 0;
  rep.log_lines = {
      fmt::format("mem_fraction_static={:.3f}", *s.gpu_memory_utilization),
      fmt::format("Load weight end. mem usage={:.2f} GB", bytes_to_gib(mb.weights_bytes)),
      fmt::format("KV Cache is allocated. #tokens: {}, K size: {:.2f} GB, V size: {:.2f} GB",
                  tokens, bytes_to_gib(mb.kv_cache_bytes / 2), bytes_to_gib(mb.kv_cache_bytes / 2)),
      fmt::format("max_total_num_tokens={}, chunked_prefill_size={}, max_running_requests={}",
                  tokens, *s.max_num_batched_tokens, *s.max_num_seqs)};
  const Workload w = default_workload(in.workload, *s.max_model_len);
  fill_rows(est, w, mb.kv_cache_bytes, true, request_bytes(c->layout));
  finish_engine(est, tokens > 0,
                "SGLang: KV = free memory after weights - total x (1 - mem_fraction_static); the "
                "reserve holds activations and CUDA graphs");
  return est;
}

// TensorRT-LLM (PyTorch backend, trtllm-serve): after weights load and a warm-up, the KV cache
// takes free_gpu_memory_fraction (default 0.9) of the free memory, in blocks of 32 tokens.
Expected<Estimate> estimate_trtllm(const EstimateInput& in) {
  auto c = prepare(in, in.settings);
  if (!c) return std::unexpected(c.error());
  Estimate& est = c->est;
  auto& s = est.settings;
  if (!s.gpu_memory_utilization) s.gpu_memory_utilization = 0.9;
  if (!s.max_num_batched_tokens) s.max_num_batched_tokens = 8192;
  if (!s.max_num_seqs) s.max_num_seqs = 2048;
  if (!s.block_size) s.block_size = 32;
  MemoryBreakdown& mb = est.per_gpu;
  mb.weights_bytes = est.weights.total_bytes;
  mb.cuda_context_bytes = k_cuda_context_bytes;
  const uint32_t graph_sets = (s.spec_runtime_control && s.num_speculative_tokens > 0) ? 2 : 1;
  add_runtime_bytes(est, in.model, std::min<uint32_t>(*s.max_num_seqs, *s.max_num_batched_tokens),
                    graph_sets);
  if (in.draft) {
    WeightOptions d;
    d.tp = s.tensor_parallel_size;
    d.compute_dtype = est.compute_dtype;
    d.quant = in.draft->quant;
    mb.draft_bytes = weights_per_rank(*in.draft, d).total_bytes;
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
  rep.log_lines = {
      fmt::format("Memory used after loading model weights (inside torch) {:.2f} GiB",
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
  auto c = prepare(in, in.settings);
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
      case EngineKind::vllm:
        return estimate_vllm(in);
      case EngineKind::sglang:
        return estimate_sglang(in);
      case EngineKind::trtllm:
        return estimate_trtllm(in);
      case EngineKind::llamacpp:
        return estimate_llamacpp(in);
      case EngineKind::hf:
        return estimate_hf(in);
    }
    return fail(ErrorKind::internal, "unknown engine");
  }();
  // What reading the model found (a variant's entry, config and checkpoint disagreeing) comes
  // first: it qualifies every figure.
  if (est)
    est->warnings.insert(est->warnings.begin(), in.model.warnings.begin(), in.model.warnings.end());
  return est;
}

}  // namespace kvprof::estimate
