// TensorRT-LLM's memory plan (PyTorch backend of trtllm-serve, 1.x) and its releases.
#include "kvprof/engines/trtllm/trtllm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kvprof/estimate/activations.hpp"
#include "kvprof/estimate/engine_setup.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner below every engine

namespace {

// TensorRT-LLM's PyTorch backend, as read in its KV-cache creator: one rule since 1.0.
constexpr std::string_view k_trtllm_version = "1.x";

}  // namespace

Expected<std::string> parse_trtllm_version(std::string_view text) {
  const std::string t = to_lower(trim(text));
  std::string_view v = t;
  if (!v.empty() && v.front() == 'v') v.remove_prefix(1);
  if (v.empty() || v == "latest" || v == "1" || v.starts_with("1.")) {
    return std::string(k_trtllm_version);
  }
  return fail(ErrorKind::usage,
              fmt::format("--engine-version '{}' is not a modelled TensorRT-LLM release; "
                          "supported: 1.x (the PyTorch backend of trtllm-serve, 1.0 and later)",
                          text));
}

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
  s.engine_version = parse_trtllm_version(s.engine_version).value_or(std::string(k_trtllm_version));
  MemoryBreakdown& mb = est.per_gpu;
  mb.weights_bytes = est.weights.total_bytes;
  mb.cuda_context_bytes = k_cuda_context_bytes;
  const uint32_t graph_sets = (s.spec_runtime_control && s.num_speculative_tokens > 0) ? 2 : 1;
  // The estimation run: dummy context requests of up to max_seq_len - 1 tokens filling
  // max_num_tokens (_create_dummy_context_requests), each with one row of logits.
  const uint64_t request_tokens =
      std::clamp<uint64_t>(*s.max_model_len - 1, 1, *s.max_num_batched_tokens);
  const auto dummy_requests =
      static_cast<uint32_t>(ceil_div(*s.max_num_batched_tokens, request_tokens));
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
  rep.max_concurrency = static_cast<double>(blocks) / ceil_div(*s.max_model_len, *s.block_size);
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
    return ceil_div(ctx, block_tokens) * block_bytes;
  });
  finish_engine(est, blocks > 0,
                "TensorRT-LLM: KV = free_gpu_memory_fraction x (free memory after weights, "
                "warm-up activations and CUDA graphs); tokens_per_block 32");
  return est;
}

}  // namespace kvprof::engines
