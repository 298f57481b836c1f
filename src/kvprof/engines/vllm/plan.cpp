// vLLM's memory plan: the budget of budget.cpp, under the rules of the release asked for
// (releases.hpp), turned into an Estimate with that release's log lines, its refusals to start as
// warnings, and the workload rows.
#include "kvprof/engines/vllm/vllm.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kvprof/engines/vllm/budget.hpp"
#include "kvprof/engines/vllm/log_lines.hpp"
#include "kvprof/estimate/engine_common.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner below every engine

Expected<Estimate> estimate_vllm(const EstimateInput& in) {
  const model::ModelSpec& m = in.model;
  Estimate est;
  est.settings = in.settings;
  EngineSettings& s = est.settings;
  const bool block_size_set = s.block_size.has_value();
  auto version = parse_vllm_version(s.engine_version);
  if (!version) return std::unexpected(version.error());
  const VllmVersionRules& rules = **version;
  s.engine_version = std::string(rules.name);
  apply_vllm_defaults(s, m, in.gpu, rules);
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
  const uint32_t pp = s.pipeline_parallel_size;
  est.gpus_total = s.tensor_parallel_size * pp * s.data_parallel_size;

  const VllmSplitPlan plan =
      vllm_split_plan(m, in.draft ? &*in.draft : nullptr, s, est.compute_dtype, *quant,
                      block_size_set, rules, vllm_mxfp4_padding(in.gpu));
  VllmBatch batch;
  batch.gpu_memory_bytes = in.gpu.memory_bytes;
  batch.gpu_memory_utilization = *s.gpu_memory_utilization;
  batch.max_model_len = *s.max_model_len;
  batch.max_num_seqs = *s.max_num_seqs;
  batch.max_num_batched_tokens = *s.max_num_batched_tokens;
  batch.kv_cache_memory_bytes = s.kv_cache_memory_bytes;
  batch.num_gpu_blocks_override = s.num_gpu_blocks_override;
  batch.pcie = in.gpu.pcie();
  const VllmBudget b = vllm_budget(plan, activation_model(m), batch);

  // Rank 0 is what vLLM's log shows for memory; the binding rank has the fewest blocks.
  const uint32_t binding = b.binding_rank;
  const WeightBreakdown& weights = plan.weights[0];
  est.binding_pp_rank = binding;
  est.weights = weights;
  est.kv_bytes_per_token = plan.layouts[0].kv_bytes_per_token;
  est.state_bytes_per_request = plan.layouts[0].state_bytes_per_request;
  est.kv_heads_replicated = plan.layouts[0].kv_heads_replicated;

  MemoryBreakdown& mb = est.per_gpu;
  mb.weights_bytes = weights.total_bytes;
  mb.activation_bytes = b.activation_bytes;
  mb.non_torch_bytes = b.non_torch_bytes + b.charged_context_bytes;
  mb.kv_cache_bytes = b.kv_cache_bytes;
  mb.cuda_graph_bytes = plan.cuda_graph_bytes;
  mb.draft_bytes = plan.draft_bytes;
  mb.cuda_context_bytes = k_cuda_context_bytes;
  mb.total_bytes = b.total_bytes;

  EngineReport& rep = est.engine_report;
  rep.available_kv_cache_bytes = static_cast<uint64_t>(std::max<int64_t>(b.available_bytes, 0));
  rep.kv_cache_tokens = b.kv.kv_cache_tokens;
  rep.num_gpu_blocks = b.num_blocks;
  rep.max_concurrency = b.kv.max_concurrency;
  rep.block_size = plan.kv.attention_block_size;
  rep.num_kv_cache_groups = static_cast<uint32_t>(plan.kv.groups.size());
  rep.max_model_len = *s.max_model_len;
  rep.max_num_seqs = *s.max_num_seqs;
  rep.max_num_batched_tokens = *s.max_num_batched_tokens;
  const uint32_t graph_sets = s.spec_runtime_control && s.num_speculative_tokens > 0 ? 2 : 1;
  if (!s.enforce_eager) rep.cuda_graphs = vllm_cuda_graph_count(rules, *s.max_num_seqs, graph_sets);
  rep.memory_fraction = *s.gpu_memory_utilization;
  rep.requested_memory_bytes = b.requested_bytes;
  VllmLogFigures lf;
  lf.gpu_memory_bytes = in.gpu.memory_bytes;
  lf.gpu_memory_utilization = *s.gpu_memory_utilization;
  lf.requested_bytes = b.requested_bytes;
  lf.weights_bytes = weights.total_bytes;
  lf.activation_bytes = b.activation_bytes;
  lf.non_torch_bytes = mb.non_torch_bytes;
  lf.available_kv_bytes = rep.available_kv_cache_bytes;
  lf.num_gpu_blocks = b.num_blocks;
  const uint64_t swap_bytes = s.swap_space_bytes.value_or(k_vllm_v0_swap_space_bytes);
  lf.num_cpu_blocks = b.bytes_per_block > 0 ? swap_bytes / b.bytes_per_block : 0;
  lf.kv_cache_tokens = rep.kv_cache_tokens;
  lf.max_model_len = rep.max_model_len;
  lf.max_concurrency = b.kv.max_concurrency;
  lf.cuda_graph_bytes = mb.cuda_graph_bytes;
  lf.enforce_eager = s.enforce_eager;
  VllmLogLines log = vllm_log_lines(rules, lf);
  rep.log_lines = std::move(log.lines);

  // Pinned host memory per GPU: offloaded weights, V0's swap space, an offloaded KV cache.
  est.host_pinned_bytes = weights.offloaded_bytes + (rules.v0_engine ? swap_bytes : 0) +
                          s.kv_offloading_bytes.value_or(0) / s.tensor_parallel_size;
  if (weights.offloaded_bytes > 0) {
    est.notes.push_back(fmt::format(
        "--cpu-offload-gb: {} of each GPU's decoder weights live in pinned host memory and cross "
        "PCIe at every forward pass (\"Model loading took\" counts only what stays)",
        format_bytes(weights.offloaded_bytes)));
  }
  if (!rules.v0_engine && s.swap_space_bytes) {
    est.notes.push_back(
        fmt::format("vLLM {} runs the V1 engine, which has no swap space: "
                    "--swap-space is ignored",
                    rules.name));
  }
  if (!s.kv_transfer_config.empty()) {
    // LMCacheConnectorV1 checked on a public TP4 startup (vllm#21348, docs/benchmarks.md): vLLM
    // logged the KV cache planned without the connector, within the release row's error.
    if (s.kv_transfer_config.find("LMCacheConnector") != std::string::npos) {
      est.notes.push_back(
          "--kv-transfer-config: LMCache's GPU buffers are small and not planned (a public "
          "startup with it logged the KV cache planned without it, within 3.5%); its host cache "
          "is LMCache's own setting (LMCACHE_MAX_LOCAL_CPU_SIZE)");
    } else {
      est.warnings.push_back(
          "--kv-transfer-config: this KV connector (NIXL, offloading, ...) is not in the plan: "
          "the GPU buffers it allocates before vLLM sizes its cache come out of the KV cache, so "
          "vLLM's cache may be smaller than planned; its host cache is the connector's own "
          "setting");
      if (est.confidence == "high") est.confidence = "medium";
    }
  }

  // vLLM refuses to start when the budget is gone or one max-length request does not fit.
  if (b.binding_available_bytes <= 0 || b.num_blocks == 0) {
    est.warnings.push_back(fmt::format(
        "no memory left for the KV cache on {} (weights {} + activations {} + non-torch {}{} > "
        "{} x {}): vLLM fails with 'No available memory for the cache blocks'",
        pp > 1 ? fmt::format("pipeline rank {}", binding) : "the GPU",
        format_bytes(plan.weights[binding].total_bytes), format_bytes(b.binding_activation_bytes),
        format_bytes(plan.non_torch_bytes[binding] - (batch.pcie ? plan.tp_comm_bytes : 0)),
        b.charged_cuda_graph_bytes > 0
            ? fmt::format(" + CUDA graphs {}", format_bytes(b.charged_cuda_graph_bytes))
            : "",
        *s.gpu_memory_utilization, format_bytes(in.gpu.memory_bytes)));
  } else if (!b.starts) {
    uint64_t lo = 0;
    uint64_t hi = *s.max_model_len;
    while (lo < hi) {
      const uint64_t mid = (lo + hi + 1) / 2;
      if (vllm_blocks_per_request(plan.kv, mid, *s.max_num_batched_tokens) <= b.num_blocks) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    est.warnings.push_back(fmt::format(
        "one request of max_model_len {} tokens needs {} KV blocks but only {} fit: vLLM refuses "
        "to start; the largest max_model_len that fits is {}",
        *s.max_model_len, b.kv.blocks_per_max_len_request, b.num_blocks, lo));
  }

  const Workload w = default_workload(in.workload, *s.max_model_len);
  const uint32_t mnbt = *s.max_num_batched_tokens;
  fill_rows(est, w, mb.kv_cache_bytes, /*paged=*/true,
            [geo = plan.kv, mnbt, bytes_per_block = b.bytes_per_block](uint64_t ctx) {
              return vllm_request_kv_bytes(geo, bytes_per_block, ctx, mnbt);
            });
  finish_verdict(est, b.starts);
  // What vLLM prints before it stops: nothing of its memory figures when the weights do not load,
  // the loading line before a failed profile run, the available memory before the KV check.
  auto& lines = rep.log_lines;
  if (est.start_failure == "loading weights") {
    lines.clear();
    est.warnings.insert(
        est.warnings.begin(),
        fmt::format("the weights ({} on {}) do not fit in the GPU's {}: vLLM dies with CUDA out "
                    "of memory while loading them",
                    format_bytes(weights.total_bytes),
                    pp > 1 ? fmt::format("pipeline rank {}", binding) : "one GPU",
                    format_bytes(in.gpu.memory_bytes)));
  } else if (est.start_failure == "the profile run") {
    lines.resize(1);
  } else if (est.start_failure == "KV cache allocation") {
    lines.resize(std::min(lines.size(), log.before_kv_check));
  } else if (est.start_failure == "CUDA graph capture" && !s.enforce_eager) {
    lines.back() = "Capturing CUDA graphs ... (runs out of memory here)";
  }
  if (!m.warnings.empty()) est.confidence = "medium";
  if (!rules.checked.empty()) {
    est.warnings.push_back(
        fmt::format("kvprof's rules for vLLM {} are {}", rules.name, rules.checked));
    if (!rules.checked.starts_with("checked on") || rules.checked.ends_with("rough")) {
      est.confidence = "low";
    } else if (est.confidence == "high") {
      est.confidence = "medium";
    }
  }
  if (m.extra_params > 0) {
    est.notes.push_back("vision/audio encoder profiling memory is not modelled separately");
  }
  est.notes.push_back(fmt::format(
      "vLLM {} ({}): KV = total x gpu_memory_utilization - weights - profile-run peak - "
      "non-torch{}{}",
      rules.name, rules.releases, rules.charges_cuda_context ? " - CUDA context" : "",
      rules.budget_holds_cuda_graphs
          ? " - the CUDA graphs its profiling estimates (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS)"
          : "; CUDA graphs are captured after the KV cache, outside that budget"));
  return est;
}

}  // namespace kvprof::engines
