// SGLang's budget (model_runner.py profile_max_num_token, the same in every release): the KV pool
// is what is free after the weights minus (1 - mem_fraction_static) of what was free before
// them, in cells of K + V of every layer (MLA: the latent), rounded down to a page. The default
// fraction, chunked prefill and CUDA-graph batch size come from the release's rule
// (releases.cpp). Request slots: the req_to_token pool (512 per context's worth of
// tokens, 2048 - 4096) and at most half the tokens run at once (tp_worker.py).
#include "kvprof/engines/sglang/sglang.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kvprof/engines/sglang/releases.hpp"
#include "kvprof/estimate/activations.hpp"
#include "kvprof/estimate/engine_setup.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner below every engine

Expected<Estimate> estimate_sglang(const EstimateInput& in) {
  auto version = parse_sglang_version(in.settings.engine_version);
  if (!version) return std::unexpected(version.error());
  const SglangVersionRules& rules = **version;
  EngineSettings settings = in.settings;
  // DeepSeek sparse attention: fp8 cache by default on Blackwell (bf16 on Hopper) and pages of 64
  // tokens (arg_groups/overrides.py, the DSA token pool).
  const bool dsa = in.model.dsa.enabled();
  if (dsa && settings.kv_cache_dtype == KvCacheDtype::auto_ && in.gpu.compute_capability >= 100) {
    settings.kv_cache_dtype = KvCacheDtype::fp8_e4m3;
  }
  if (dsa && !settings.block_size) settings.block_size = 64;
  auto c = prepare_engine(in, settings);
  if (!c) return std::unexpected(c.error());
  Estimate& est = c->est;
  auto& s = est.settings;
  s.engine_version = std::string(rules.name);
  SglangDefaultsInput d_in;
  d_in.gpu_memory_mib = in.gpu.memory_bytes >> 20;
  d_in.tp = s.tensor_parallel_size;
  d_in.pp = s.pipeline_parallel_size;
  d_in.speculative = !s.speculative_model.empty();
  d_in.chunked_prefill_size = s.max_num_batched_tokens;
  d_in.cuda_graph_max_bs = s.cuda_graph_max_bs;
  d_in.vision_layers = in.model.vision_layers;
  d_in.vision_hidden_size = in.model.vision_hidden_size;
  const SglangDefaults defaults = sglang_defaults(rules, d_in);
  const bool fraction_given = s.gpu_memory_utilization.has_value();
  if (!fraction_given) s.gpu_memory_utilization = defaults.mem_fraction_static;
  if (!s.max_num_batched_tokens) s.max_num_batched_tokens = defaults.chunked_prefill_size;
  if (!s.cuda_graph_max_bs) s.cuda_graph_max_bs = defaults.cuda_graph_max_bs;
  const uint32_t page_tokens = s.block_size.value_or(1);

  MemoryBreakdown& mb = est.per_gpu;
  mb.weights_bytes = est.weights.total_bytes;
  mb.cuda_context_bytes = k_cuda_context_bytes;
  const auto total = static_cast<double>(in.gpu.memory_bytes);
  // SGLang's "total" is the memory free before the weights load: after the CUDA context and the
  // TP group's communication buffers (init_torch_distributed runs first).
  const uint64_t tp_comm = in.gpu.pcie() ? 0 : tp_comm_bytes(s.tensor_parallel_size);
  const double free_before = total - static_cast<double>(mb.cuda_context_bytes + tp_comm);
  const double rest =
      free_before * *s.gpu_memory_utilization - static_cast<double>(mb.weights_bytes);
  const uint64_t cell = c->layout.kv_bytes_per_token;
  uint64_t tokens = rest > 0 && cell > 0 ? static_cast<uint64_t>(rest) / cell : 0;
  tokens = tokens / page_tokens * page_tokens;
  mb.kv_cache_bytes = tokens * cell;

  // Request slots: the given --max-running-requests, else the req_to_token pool's size.
  const uint64_t context_len = *s.max_model_len;
  const uint64_t pool =
      s.max_num_seqs
          ? *s.max_num_seqs
          : std::clamp<uint64_t>(context_len == 0 ? 0 : tokens * 512 / context_len, 2048, 4096);
  const uint64_t running = std::min<uint64_t>(s.max_num_seqs ? *s.max_num_seqs : tokens / 2, pool);
  s.max_num_seqs = static_cast<uint32_t>(std::max<uint64_t>(running, 1));
  add_runtime_bytes(est, in.model, *s.cuda_graph_max_bs, 1);
  sum_total(mb);

  auto& rep = est.engine_report;
  report_settings(rep, s);
  rep.block_size = page_tokens;
  rep.available_kv_cache_bytes = mb.kv_cache_bytes;
  rep.kv_cache_tokens = tokens;
  rep.num_gpu_blocks = tokens / page_tokens;
  rep.max_concurrency = context_len > 0 ? static_cast<double>(tokens) / context_len : 0;
  rep.log_lines = {
      fmt::format("mem_fraction_static={:.3f}", *s.gpu_memory_utilization),
      fmt::format("Load weight end. mem usage={:.2f} GB", bytes_to_gib(mb.weights_bytes)),
      fmt::format("KV Cache is allocated. #tokens: {}, K size: {:.2f} GB, V size: {:.2f} GB",
                  tokens, bytes_to_gib(mb.kv_cache_bytes / 2), bytes_to_gib(mb.kv_cache_bytes / 2)),
      fmt::format("max_total_num_tokens={}, chunked_prefill_size={}, max_prefill_tokens=16384, "
                  "max_running_requests={}, context_len={}",
                  tokens, *s.max_num_batched_tokens, *s.max_num_seqs, context_len)};
  const Workload w = default_workload(in.workload, context_len);
  fill_rows(est, w, mb.kv_cache_bytes, true, request_bytes(c->layout));
  if (&rules != &sglang_latest_version()) {
    est.warnings.push_back(
        fmt::format("kvprof's rules for SGLang {} are {}", rules.name, rules.checked));
  }
  if (!fraction_given) {
    est.notes.push_back(fmt::format(
        "SGLang {} picks mem_fraction_static from the GPU's memory as nvidia-smi reports it, a "
        "little above the usable memory kvprof holds for {}: its default may differ by 0.001-0.002",
        rules.name, in.gpu.name));
  }
  finish_engine(est, tokens > 0,
                fmt::format("SGLang {} ({}): KV = free memory before the weights x "
                            "mem_fraction_static - weights; the rest holds activations and CUDA "
                            "graphs (cuda_graph_max_bs {})",
                            rules.name, rules.releases, *s.cuda_graph_max_bs));
  return est;
}

}  // namespace kvprof::engines
