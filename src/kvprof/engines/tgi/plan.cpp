// TGI's KV rule (server/text_generation_server/models/flash_causal_lm.py warmup): the router
// sends a warmup batch of --max-batch-prefill-tokens prompt tokens; the shard allocates its
// blocks, runs the prefill, and measures what is free with the batch's KV and the prefill's
// activations still held. What is free above a headroom becomes KV blocks, and the batch's own
// blocks are added back:
//   v3:    blocks = (free - (1 - fraction x wiggle) x total) / block_bytes + warmup_blocks
//   v1-v2: blocks = (free - (1 - fraction) x total) x wiggle / block_bytes + warmup_blocks
// Their tokens are "Setting max batch total tokens to N" (the least over the shards). CUDA graphs
// (batch sizes 1 - 32) are captured afterwards inside the headroom, and a full prefill needs the
// warmup's activations again while serving: both are in the plan's total, which can pass the GPU
// after a warmup that succeeded (the out-of-memory errors TGI users meet under load).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "kvprof/engines/tgi/releases.hpp"
#include "kvprof/engines/tgi/tgi.hpp"
#include "kvprof/estimate/activations.hpp"
#include "kvprof/estimate/engine_setup.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner below every engine

namespace {

// Bytes per logit of the warmup's prompt logprobs beyond the logits themselves: in all about 8
// a logit on one GPU and 6 on a sharded model (whose logits are gathered from the shards), read
// off public startups — Llama 3.1 8B on an A10G (v2.2.0) and Mistral 7B on an A100 (v2.0.0);
// Mixtral 8x22B on 4 H100s (v2.0.4) and Llama 3.1 70B on 2 A100s (docs/benchmarks.md, "TGI").
constexpr double k_tgi_logprob_bytes_per_logit = 6.0;
constexpr double k_tgi_sharded_logprob_bytes_per_logit = 4.0;

// NCCL's buffers of a sharded TGI (no custom all-reduce): assumed.
constexpr uint64_t k_tgi_nccl_bytes = 256ULL << 20;
constexpr uint64_t k_tgi_cublas_bytes = 72ULL << 20;

// v3.0.0, from which only 8-bit bitsandbytes turns CUDA graphs off (4-bit from v3.0.2 in fact;
// the v3.0 row stands for both).
constexpr uint32_t k_tgi_v3 = 3;
constexpr uint32_t k_tgi_v3_minor = 0;

// TGI captures 6 graphs (batch sizes 1 - 32) where vLLM's calibrated pool holds 51 up to 512
// tokens: assumed a quarter of that pool, not yet checked against a TGI log (none prints it).
constexpr uint64_t k_tgi_graph_pool_divisor = 4;

// The input, total and prefill tokens the launcher settles on, and whether the server picks
// input and total after its warmup.
struct TgiLimits {
  std::optional<uint64_t> max_input_tokens;
  std::optional<uint64_t> max_total_tokens;
  uint64_t prefill_tokens = 4096;
  std::vector<std::string> log_lines;
};

TgiLimits tgi_limits(const TgiReleaseRules& r, const EstimateInput& in, double fraction) {
  const auto& s = in.settings;
  const auto& m = in.model;
  TgiLimits l;
  l.max_input_tokens = s.max_input_tokens;
  l.max_total_tokens = s.max_model_len;
  const std::optional<uint64_t> prefill_given = s.max_num_batched_tokens;
  const uint64_t positions = m.max_position_embeddings > 0 ? m.max_position_embeddings : 4096;
  switch (r.defaults) {
    case TgiDefaultsRule::fixed:
      if (!l.max_input_tokens) l.max_input_tokens = 1024;
      if (!l.max_total_tokens) l.max_total_tokens = 2048;
      l.prefill_tokens = prefill_given.value_or(4096);
      return l;
    case TgiDefaultsRule::from_config: {
      const uint64_t cap = std::min<uint64_t>(positions, 4096);
      if (!l.max_input_tokens) {
        l.max_input_tokens = cap - 1;
        l.log_lines.push_back(fmt::format("Default `max_input_tokens` to {}", cap - 1));
      }
      if (!l.max_total_tokens) {
        l.max_total_tokens = cap;
        l.log_lines.push_back(fmt::format("Default `max_total_tokens` to {}", cap));
      }
      l.prefill_tokens =
          prefill_given.value_or(s.max_num_seqs ? uint64_t{*s.max_num_seqs} * *l.max_input_tokens
                                                : *l.max_input_tokens + 50);
      break;
    }
    case TgiDefaultsRule::prefill_only:
      l.prefill_tokens = prefill_given.value_or(std::min<uint64_t>(4096, positions));
      break;
    case TgiDefaultsRule::prefill_by_compute:
      l.prefill_tokens = prefill_given.value_or(
          tgi_v3_default_prefill_tokens(r, m, in.gpu, s.tensor_parallel_size, fraction));
      break;
  }
  if (!prefill_given)
    l.log_lines.push_back(
        fmt::format("Default `max_batch_prefill_tokens` to {}", l.prefill_tokens));
  return l;
}

// The warmup batch (the router's warmup loop): its requests' prompt tokens and the tokens each
// holds in the cache.
struct WarmupBatch {
  uint64_t requests = 0;
  uint64_t blocks = 0;
};

WarmupBatch warmup_batch(const TgiReleaseRules& r, const TgiLimits& l, uint32_t block_tokens,
                         std::optional<uint32_t> max_batch_size) {
  WarmupBatch b;
  const auto blocks_of = [&](uint64_t tokens) { return ceil_div(tokens, uint64_t{block_tokens}); };
  if (!l.max_input_tokens || !l.max_total_tokens) {  // one request of the whole prefill
    b.requests = 1;
    b.blocks = blocks_of(l.prefill_tokens);
    return b;
  }
  uint64_t n = 0;
  while (n < l.prefill_tokens && b.requests < 100000) {
    const uint64_t truncate = std::min(*l.max_input_tokens, l.prefill_tokens - n);
    // block_tokens = prompt + max_new_tokens - 1: max_total - 1 from v1.2, the prompt + 1 before.
    b.blocks += blocks_of(r.warmup_reserves_total ? *l.max_total_tokens - 1 : truncate + 1);
    n += truncate;
    ++b.requests;
    if (max_batch_size && b.requests == *max_batch_size) break;
  }
  return b;
}

}  // namespace

Expected<Estimate> estimate_tgi(const EstimateInput& in) {
  auto release = parse_tgi_release(in.settings.engine_version);
  if (!release) return std::unexpected(release.error());
  const TgiReleaseRules& r = **release;
  if (in.settings.pipeline_parallel_size > 1 || in.settings.data_parallel_size > 1) {
    return fail(
        ErrorKind::usage,
        "TGI splits a model over GPUs only by --num-shard (tensor parallel): no -pp or -dp");
  }
  const double fraction = in.settings.gpu_memory_utilization.value_or(1.0);
  if (!valid_memory_fraction(fraction)) {
    return fail(ErrorKind::usage,
                fmt::format("--cuda-memory-fraction {} is not in (0, 1]", fraction));
  }
  // TGI's --quantize names for runtime methods, as the weights they leave: bitsandbytes and eetq
  // hold int8 weights, bitsandbytes-nf4/-fp4 4-bit blocks (models/__init__.py).
  EstimateInput runtime = in;
  auto& q = runtime.settings.quantization;
  const std::string tgi_quantize = q;
  if (q == "bitsandbytes" || q == "eetq") q = "w8a8";
  if (q == "bitsandbytes-nf4" || q == "bitsandbytes-fp4") q = "bnb-4bit";
  // "Bitsandbytes doesn't work with cuda graphs, deactivating them" (launcher, 8-bit only from
  // v3.0.2; every bitsandbytes before).
  if (tgi_quantize == "bitsandbytes" ||
      (tgi_quantize.starts_with("bitsandbytes-") &&
       std::tie(r.first_major, r.first_minor) < std::tie(k_tgi_v3, k_tgi_v3_minor))) {
    runtime.settings.enforce_eager = true;
  }
  TgiLimits limits = tgi_limits(r, runtime, fraction);
  // The launcher's own checks (launcher/src/main.rs).
  if (limits.max_total_tokens && *limits.max_total_tokens < 2) {
    return fail(ErrorKind::usage, "--max-total-tokens must be at least 2");
  }
  if (limits.max_input_tokens && limits.max_total_tokens &&
      *limits.max_input_tokens >= *limits.max_total_tokens) {
    return fail(ErrorKind::usage,
                fmt::format("`max_input_tokens` must be < `max_total_tokens`: {} >= {}",
                            *limits.max_input_tokens, *limits.max_total_tokens));
  }
  EngineSettings settings = runtime.settings;
  settings.max_model_len = limits.max_total_tokens;  // unset: picked below, after the warmup
  auto c = prepare_engine(runtime, settings);
  if (!c) return std::unexpected(c.error());
  Estimate& est = c->est;
  auto& s = est.settings;
  s.engine_version = std::string(r.name);
  s.gpu_memory_utilization = fraction;
  s.max_num_batched_tokens =
      static_cast<uint32_t>(std::min<uint64_t>(limits.prefill_tokens, UINT32_MAX));
  const uint32_t block_tokens = s.block_size.value_or(r.block_tokens);
  s.block_size = block_tokens;
  const uint64_t block_bytes = c->layout.kv_bytes_per_token * block_tokens;
  const WarmupBatch warmup = warmup_batch(r, limits, block_tokens, in.settings.max_num_seqs);

  // A tied LM head is loaded a second time from the embedding's tensor (SpeculativeHead.load
  // with prefix "model.embed_tokens"): its own copy, split over the shards like the embedding.
  if (in.model.tie_word_embeddings && est.weights.lm_head_bytes == 0) {
    est.weights.lm_head_bytes = est.weights.embedding_bytes;
    est.weights.total_bytes += est.weights.lm_head_bytes;
  }
  MemoryBreakdown& mb = est.per_gpu;
  mb.weights_bytes = est.weights.total_bytes;
  mb.cuda_context_bytes = k_cuda_context_bytes;
  mb.non_torch_bytes = k_tgi_cublas_bytes + (s.tensor_parallel_size > 1 ? k_tgi_nccl_bytes : 0);
  // The warmup prefill's peak (with its prompt logprobs where the release asks for them), and a
  // full prefill's while serving (logits of each request's last token).
  ProfileRunShape shape;
  shape.tokens = *s.max_num_batched_tokens;
  shape.requests = static_cast<uint32_t>(warmup.requests);
  shape.tp = s.tensor_parallel_size;
  shape.compute_dtype = est.compute_dtype;
  shape.sampler_bytes_per_logit = 0;
  mb.activation_bytes = profile_run_peak(in.model, shape).peak_bytes;
  if (r.warmup_prefill_logprobs) {
    shape.requests = static_cast<uint32_t>(std::min<uint64_t>(limits.prefill_tokens, UINT32_MAX));
    shape.sampler_bytes_per_logit = s.tensor_parallel_size > 1
                                        ? k_tgi_sharded_logprob_bytes_per_logit
                                        : k_tgi_logprob_bytes_per_logit;
  }
  const uint64_t warmup_peak_bytes = profile_run_peak(in.model, shape).peak_bytes;

  // What the shard sees free after the warmup prefill, and the blocks it makes of it.
  const auto total = static_cast<double>(in.gpu.memory_bytes);
  const double used =
      static_cast<double>(mb.cuda_context_bytes + mb.weights_bytes + mb.non_torch_bytes +
                          warmup_peak_bytes + warmup.blocks * block_bytes);
  const double free_after = std::max(0.0, total - used);
  double kv_free = 0;
  if (r.wiggle_inside_fraction) {
    kv_free = std::max(0.0, free_after - (1.0 - fraction * r.wiggle_room) * total);
  } else {
    kv_free = std::max(0.0, free_after - (1.0 - fraction) * total) * r.wiggle_room;
  }
  const bool prefill_fits = used <= total * fraction;
  const uint64_t blocks = block_bytes > 0 && prefill_fits
                              ? static_cast<uint64_t>(kv_free) / block_bytes + warmup.blocks
                              : 0;
  const uint64_t tokens = blocks * block_tokens;
  mb.kv_cache_bytes = blocks * block_bytes;
  // Graphs for batch sizes 32 down to 1, captured after the KV cache, in the headroom.
  mb.cuda_graph_bytes = s.enforce_eager ? 0
                                        : cuda_graph_bytes(in.model, est.weights.layers_on_rank,
                                                           s.tensor_parallel_size, 1) /
                                              k_tgi_graph_pool_divisor;
  sum_total(mb);

  // The server's own input and total limits (v2.4.1+), chosen from what the warmup left.
  const bool chunking =
      r.wiggle_inside_fraction && block_tokens != 16 && in.model.vision_layers == 0;
  if (!limits.max_total_tokens) {
    limits.max_total_tokens =
        chunking ? std::min<uint64_t>(tokens, in.model.max_position_embeddings > 0
                                                  ? in.model.max_position_embeddings
                                                  : tokens)
                 : limits.prefill_tokens;
  }
  if (!limits.max_input_tokens) limits.max_input_tokens = *limits.max_total_tokens - 1;
  s.max_model_len = *limits.max_total_tokens;
  s.max_input_tokens = *limits.max_input_tokens;
  if (!s.max_num_seqs) s.max_num_seqs = 128;  // --max-concurrent-requests
  const bool starts = prefill_fits && tokens >= *limits.max_total_tokens;

  auto& rep = est.engine_report;
  report_settings(rep, s);
  rep.available_kv_cache_bytes = mb.kv_cache_bytes;
  rep.kv_cache_tokens = tokens;
  rep.num_gpu_blocks = blocks;
  // The default batch sizes 1 - 32, or those of a --cuda-graphs list up to its largest.
  static constexpr uint32_t k_default_graph_sizes[] = {1, 2, 4, 8, 16, 32};
  uint32_t graphs = 0;
  for (const uint32_t bs : k_default_graph_sizes)
    graphs += bs <= s.cuda_graph_max_bs.value_or(32) ? 1 : 0;
  rep.cuda_graphs = s.enforce_eager ? 0 : std::max<uint32_t>(graphs, 1);
  rep.max_concurrency = static_cast<double>(tokens) / static_cast<double>(*limits.max_total_tokens);
  rep.log_lines = std::move(limits.log_lines);
  if (!s.enforce_eager && !s.cuda_graph_max_bs)
    rep.log_lines.emplace_back("Using default cuda graphs [1, 2, 4, 8, 16, 32]");
  if (!s.enforce_eager && s.cuda_graph_max_bs) {
    est.notes.push_back(fmt::format(
        "--cuda-graphs: planned as the powers of two up to {} ({} graphs); the graph pool is "
        "sized as for the default list",
        *s.cuda_graph_max_bs, rep.cuda_graphs));
  }
  if (s.enforce_eager && tgi_quantize.starts_with("bitsandbytes")) {
    rep.log_lines.emplace_back("Bitsandbytes doesn't work with cuda graphs, deactivating them");
  }
  if (r.logs_kv_blocks) {
    rep.log_lines.push_back(fmt::format("KV-cache blocks: {}, size: {}", blocks, block_tokens));
  }
  rep.log_lines.push_back(fmt::format("Setting max batch total tokens to {}", tokens));
  if (r.defaults == TgiDefaultsRule::prefill_only ||
      r.defaults == TgiDefaultsRule::prefill_by_compute) {
    if (!in.settings.max_input_tokens) {
      rep.log_lines.push_back(
          fmt::format("Maximum input tokens defaulted to {}", *limits.max_input_tokens));
    }
    if (!in.settings.max_model_len) {
      rep.log_lines.push_back(
          fmt::format("Maximum total tokens defaulted to {}", *limits.max_total_tokens));
    }
  }
  const Workload w = default_workload(in.workload, *s.max_model_len);
  fill_rows(est, w, mb.kv_cache_bytes, true, request_bytes(c->layout));
  const bool weights_load =
      static_cast<double>(mb.weights_bytes + mb.cuda_context_bytes) <= total * fraction;
  if (!weights_load) {
    // The verdict says so; nothing after loading happens.
  } else if (!prefill_fits) {
    est.warnings.push_back(fmt::format(
        "the warmup prefill of {} tokens does not fit: TGI stops with \"Not enough memory to "
        "handle {} prefill tokens. You need to decrease `--max-batch-prefill-tokens`\"",
        limits.prefill_tokens, limits.prefill_tokens));
  } else if (tokens < *limits.max_total_tokens) {
    est.warnings.push_back(fmt::format(
        "TGI stops after its warmup: \"Not enough memory to handle `max_total_tokens={}`\" "
        "(the cache holds {} tokens)",
        *limits.max_total_tokens, tokens));
  }
  if (tgi_quantize != s.quantization) {
    est.notes.push_back(
        fmt::format("--quantize {}: planned as {} weights{}", tgi_quantize,
                    s.quantization == "w8a8" ? "int8" : "4-bit NF4",
                    s.enforce_eager ? ", without CUDA graphs (TGI turns them off)" : ""));
  }
  finish_engine(
      est, starts,
      fmt::format("TGI {} ({}): KV = what is free after a warmup prefill of {} tokens, "
                  "less {} of the GPU, in blocks of {} tokens; CUDA graphs and the "
                  "next full prefill come out of that headroom",
                  r.name, r.releases, limits.prefill_tokens,
                  r.wiggle_inside_fraction
                      ? fmt::format("(1 - {} x {})", fraction, r.wiggle_room)
                      : fmt::format("(1 - {}), and {} of the rest,", fraction, r.wiggle_room),
                  block_tokens));
  return est;
}

}  // namespace kvprof::engines
