// Estimate output: JSON and text.
#include "kvprof/report/text/estimate_report.hpp"

#include <fmt/format.h>

#include "kvprof/report/text/table.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::report::text {

namespace {

using estimate::Estimate;

// {"draft_len_0": 32, "draft_len_4": 32}: the graphs of each set the engine captures.
nlohmann::json graph_sets_json(const std::vector<std::pair<std::string, uint32_t>>& sets) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, graphs] : sets)
    out[name] = graphs;
  return out;
}

template <class T>
nlohmann::json opt(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::string gib(uint64_t bytes) {
  return fmt::format("{:.2f}", bytes_to_gib(bytes));
}

std::string signed_gib(int64_t bytes) {
  return fmt::format("{:+.2f}", static_cast<double>(bytes) / static_cast<double>(k_gib));
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

namespace {

nlohmann::json llamacpp_json(const estimate::LlamaCppSummary& l) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : l.gpus) {
    gpus.push_back({{"device", g.device},
                    {"layers", g.layers},
                    {"output_layer", g.output},
                    {"weights_bytes", g.model_bytes},
                    {"kv_cache_bytes", g.kv_bytes},
                    {"compute_bytes", g.compute_bytes},
                    {"total_bytes", g.total_bytes},
                    {"budget_bytes", g.budget_bytes},
                    {"headroom_bytes",
                     static_cast<int64_t>(g.budget_bytes) - static_cast<int64_t>(g.total_bytes)}});
  }
  return {{"has_gpu", l.has_gpu},
          {"gpus", std::move(gpus)},
          {"gpu_layers", l.gpu_layers},
          {"output_on_gpu", l.output_on_gpu},
          {"kv_cells", l.kv_cells},
          {"kv_cells_swa", l.kv_cells_swa},
          {"host",
           {{"weights_bytes", l.host_weights_bytes},
            {"kv_cache_bytes", l.host_kv_bytes},
            {"compute_reserved_bytes", l.host_compute_reserved_bytes},
            {"compute_bytes", l.host_compute_bytes},
            {"output_bytes", l.host_output_bytes},
            {"runtime_bytes", l.host_runtime_bytes},
            {"total_bytes", l.host_total_bytes},
            {"budget_bytes", l.host_budget_bytes},
            {"headroom_bytes", l.host_headroom_bytes}}},
          {"max_n_gpu_layers",
           l.max_gpu_layers ? nlohmann::json(*l.max_gpu_layers) : nlohmann::json(nullptr)},
          {"min_n_cpu_moe",
           l.min_n_cpu_moe ? nlohmann::json(*l.min_n_cpu_moe) : nlohmann::json(nullptr)},
          {"max_ctx_size", l.max_ctx_size},
          {"override_log_lines", l.override_lines},
          {"fit", l.fit_args.empty() ? nlohmann::json(nullptr)
                                     : nlohmann::json{{"args", l.fit_args},
                                                      {"success", l.fit_success},
                                                      {"log_lines", l.fit_lines}}}};
}

std::string llamacpp_text(const estimate::LlamaCppSummary& l) {
  Table t({"host RAM", "GiB"});
  t.add_row({"weights (resident)", gib(l.host_weights_bytes)});
  t.add_row({"KV cache", gib(l.host_kv_bytes)});
  t.add_row({"compute buffer (reserved)", gib(l.host_compute_reserved_bytes)});
  t.add_row({"output (logits)", gib(l.host_output_bytes)});
  t.add_row({"libllama + vocabulary", gib(l.host_runtime_bytes)});
  if (l.host_compute_reserved_bytes > l.host_compute_bytes) {
    t.add_row(
        {"compute never touched",
         signed_gib(-static_cast<int64_t>(l.host_compute_reserved_bytes - l.host_compute_bytes))});
  }
  t.add_row({"total (resident)", gib(l.host_total_bytes)});
  t.add_row({"RAM", gib(l.host_budget_bytes)});
  t.add_row({"headroom", signed_gib(l.host_headroom_bytes)});
  std::string out = "\n" + t.render();
  if (l.max_gpu_layers) out += fmt::format("\nlargest -ngl that fits: {}", *l.max_gpu_layers);
  if (l.min_n_cpu_moe) {
    out += fmt::format(
        "\nfewest --n-cpu-moe that fits: {} (the experts of the first {} layers on "
        "the host)",
        *l.min_n_cpu_moe, *l.min_n_cpu_moe);
  }
  out += l.max_ctx_size > 0 ? fmt::format("\nlargest -c that fits: {}\n", l.max_ctx_size)
                            : std::string("\nno -c fits\n");
  if (!l.override_lines.empty()) {
    out += fmt::format("{} tensors placed by -ot/--cpu-moe (llama-server -v logs each), e.g.: {}\n",
                       l.override_lines.size(), l.override_lines.front());
  }
  return out;
}

// What --fit chose (as llama-fit-params prints it) and the lines it logs.
std::string fit_text(const estimate::LlamaCppSummary& l) {
  if (l.fit_args.empty()) return "";
  std::string out =
      fmt::format("\n--fit chooses{}: {}\n", l.fit_success ? "" : " (target not met)", l.fit_args);
  for (const auto& line : l.fit_lines)
    out += "  " + line + "\n";
  return out;
}

}  // namespace

nlohmann::json estimate_json(const Estimate& e) {
  const auto& s = e.settings;
  const auto& mb = e.per_gpu;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : e.rows) {
    rows.push_back(
        {{"context_tokens", r.context_tokens},
         {"concurrency", r.concurrency},
         {"kv_needed_bytes", r.kv_needed_bytes},
         {"kv_capacity_bytes", r.kv_capacity_bytes},
         {"total_bytes", r.total_bytes},
         {"margin_bytes", r.margin_bytes},
         {"verdict", estimate::verdict_name(r.verdict)},
         {"risk", r.risk},
         {"max_concurrency_at_context", estimate::max_concurrency_at(e, r.context_tokens)},
         {"max_context_at_concurrency",
          estimate::max_context_at(
              e, r.concurrency,
              std::max<uint64_t>(e.engine_report.max_model_len, r.context_tokens))},
         {"note", r.note}});
  }
  const auto& rep = e.engine_report;
  return {
      {"schema_version", k_estimate_schema_version},
      {"kind", "estimate"},
      {"model", {{"id", e.model_id}, {"source", e.model_source}}},
      {"gpu", {{"id", e.gpu.id}, {"name", e.gpu.name}, {"memory_bytes", e.gpu.memory_bytes}}},
      {"engine", engines::engine_name(s.engine)},
      {"settings",
       {{"tensor_parallel_size", s.tensor_parallel_size},
        {"pipeline_parallel_size", s.pipeline_parallel_size},
        {"data_parallel_size", s.data_parallel_size},
        {"enable_expert_parallel", s.enable_expert_parallel},
        {"enable_dp_attention", s.enable_dp_attention},
        {"expert_parallel_size", s.expert_parallel_size},
        {"gpu_memory_utilization", opt(s.gpu_memory_utilization)},
        {"max_model_len", opt(s.max_model_len)},
        {"max_num_seqs", opt(s.max_num_seqs)},
        {"max_num_batched_tokens", opt(s.max_num_batched_tokens)},
        {"block_size", opt(s.block_size)},
        {"dtype", model::dtype_name(e.compute_dtype)},
        {"quantization", e.quantization},
        {"kv_cache_dtype", estimate::kv_cache_dtype_name(s.kv_cache_dtype)},
        {"enforce_eager", s.enforce_eager},
        {"speculative_model", s.speculative_model},
        {"num_speculative_tokens", s.num_speculative_tokens}}},
      {"gpus_total", e.gpus_total},
      {"per_gpu",
       {{"weights_bytes", mb.weights_bytes},
        {"kv_cache_bytes", mb.kv_cache_bytes},
        {"activation_bytes", mb.activation_bytes},
        {"cuda_graph_bytes", mb.cuda_graph_bytes},
        {"non_torch_bytes", mb.non_torch_bytes},
        {"cuda_context_bytes", mb.cuda_context_bytes},
        {"draft_bytes", mb.draft_bytes},
        {"untouched_bytes", mb.untouched_bytes},
        {"overhead_bytes", mb.overhead_bytes()},
        {"total_bytes", mb.total_bytes}}},
      {"weights_detail",
       {{"embedding_bytes", e.weights.embedding_bytes},
        {"lm_head_bytes", e.weights.lm_head_bytes},
        {"attention_bytes", e.weights.attention_bytes},
        {"mlp_bytes", e.weights.mlp_bytes},
        {"expert_bytes", e.weights.expert_bytes},
        {"other_bytes", e.weights.other_bytes},
        {"buffer_bytes", e.weights.buffer_bytes},
        {"params_total", e.weights.params_total},
        {"params_on_gpu", e.weights.params_on_rank},
        {"layers_on_gpu", e.weights.layers_on_rank},
        {"from_checkpoint_tensors", e.weights.exact}}},
      {"kv_bytes_per_token", e.kv_bytes_per_token},
      {"state_bytes_per_request", e.state_bytes_per_request},
      {"kv_heads_replicated", e.kv_heads_replicated},
      {"engine_report",
       {{"available_kv_cache_bytes", rep.available_kv_cache_bytes},
        {"kv_cache_tokens", rep.kv_cache_tokens},
        {"num_gpu_blocks", rep.num_gpu_blocks},
        {"max_concurrency", rep.max_concurrency},
        {"block_size", rep.block_size},
        {"num_kv_cache_groups", rep.num_kv_cache_groups},
        {"max_model_len", rep.max_model_len},
        {"max_num_seqs", rep.max_num_seqs},
        {"cuda_graphs", rep.cuda_graphs},
        {"cuda_graph_sets", graph_sets_json(rep.cuda_graph_sets)},
        {"max_num_batched_tokens", rep.max_num_batched_tokens},
        {"memory_fraction", rep.memory_fraction},
        {"requested_memory_bytes", rep.requested_memory_bytes},
        {"log_lines", rep.log_lines}}},
      {"rows", rows},
      {"verdict", estimate::verdict_name(e.verdict)},
      {"start_failure",
       e.start_failure.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.start_failure)},
      {"headroom_bytes", e.headroom_bytes},
      {"host_pinned_bytes", e.host_pinned_bytes},
      {"binding_pp_rank", e.binding_pp_rank},
      {"confidence", e.confidence},
      {"warnings", e.warnings},
      {"notes", e.notes},
      {"llamacpp", e.llamacpp ? llamacpp_json(*e.llamacpp) : nlohmann::json(nullptr)},
  };
}

std::string estimate_text(const Estimate& e) {
  const auto& s = e.settings;
  const auto& mb = e.per_gpu;
  // The release whose rules the plan follows, where one is pinned (vLLM, SGLang, TensorRT-LLM).
  const std::string engine =
      s.engine_version.empty()
          ? std::string(engines::engine_name(s.engine))
          : fmt::format("{} {}", engines::engine_name(s.engine), s.engine_version);
  std::string out =
      fmt::format("kvprof estimate: {} on {} x {} ({} GiB usable each), engine {}\n", e.model_id,
                  e.gpus_total, e.gpu.name, gib(e.gpu.memory_bytes), engine);
  out += fmt::format(
      "  tp={} pp={} dp={}  dtype={}  quantization={}  kv-cache-dtype={}  max-model-len={}",
      s.tensor_parallel_size, s.pipeline_parallel_size, s.data_parallel_size,
      model::dtype_name(e.compute_dtype), e.quantization,
      estimate::kv_cache_dtype_name(s.kv_cache_dtype), s.max_model_len.value_or(0));
  if (s.gpu_memory_utilization)
    out += fmt::format("  memory-fraction={:.3g}", *s.gpu_memory_utilization);
  out += "\n\n";
  const bool cpu_only = e.llamacpp && !e.llamacpp->has_gpu;
  Table parts({cpu_only ? "host (CPU deployment)" : "per GPU", "GiB"});
  parts.add_row({"weights", gib(mb.weights_bytes)});
  parts.add_row({"KV cache", gib(mb.kv_cache_bytes)});
  // llama.cpp's activations are its compute buffers as reserved; in host RAM only the pages a
  // running server touches are resident, so both are shown and the parts add up to the total.
  if (mb.untouched_bytes > 0) {
    parts.add_row({fmt::format("activations (reserved; {} resident)",
                               gib(mb.activation_bytes - mb.untouched_bytes)),
                   gib(mb.activation_bytes)});
  } else {
    parts.add_row({e.llamacpp ? "activations (compute buffers)" : "activations (peak)",
                   gib(mb.activation_bytes)});
  }
  if (!cpu_only) {
    // "CUDA graphs (64: draft_len_4 32, draft_len_0 32)" where the engine's graph count is known.
    std::string graphs = "CUDA graphs";
    if (e.engine_report.cuda_graphs > 0) {
      graphs += fmt::format(" ({}", e.engine_report.cuda_graphs);
      for (size_t i = 0; i < e.engine_report.cuda_graph_sets.size(); ++i) {
        const auto& [name, n] = e.engine_report.cuda_graph_sets[i];
        graphs += fmt::format("{}{} {}", i == 0 ? ": " : ", ", name, n);
      }
      graphs += ")";
    }
    parts.add_row({graphs, gib(mb.cuda_graph_bytes)});
  }
  parts.add_row(
      {cpu_only ? "output + libllama" : "non-torch (NCCL, cuBLAS)", gib(mb.non_torch_bytes)});
  if (!cpu_only) parts.add_row({"CUDA context", gib(mb.cuda_context_bytes)});
  if (mb.draft_bytes > 0) parts.add_row({"draft model", gib(mb.draft_bytes)});
  if (mb.untouched_bytes > 0) {
    parts.add_row(
        {"activations never touched", signed_gib(-static_cast<int64_t>(mb.untouched_bytes))});
  }
  parts.add_row({mb.untouched_bytes > 0 ? "total (resident)" : "total", gib(mb.total_bytes)});
  parts.add_row({cpu_only ? "RAM" : "GPU usable", gib(e.gpu.memory_bytes)});
  parts.add_row({"headroom", signed_gib(e.headroom_bytes)});
  out += parts.render();
  if (e.llamacpp && e.llamacpp->has_gpu) out += llamacpp_text(*e.llamacpp);
  if (e.llamacpp) out += fit_text(*e.llamacpp);
  if (cpu_only) {
    out += e.llamacpp->max_ctx_size > 0
               ? fmt::format("\nlargest -c that fits: {}\n", e.llamacpp->max_ctx_size)
               : std::string("\nno -c fits\n");
  }
  if (e.host_pinned_bytes > 0) {
    out += fmt::format(
        "\nhost memory pinned per GPU: {:.2f} GiB (weights {:.2f}{})\n",
        bytes_to_gib(e.host_pinned_bytes), bytes_to_gib(e.weights.offloaded_bytes),
        e.settings.kv_offloading_bytes
            ? fmt::format(", KV cache {:.2f}", bytes_to_gib(*e.settings.kv_offloading_bytes /
                                                            e.settings.tensor_parallel_size))
            : "");
  }
  out += fmt::format("\nKV bytes per token per GPU: {}", e.kv_bytes_per_token);
  if (e.state_bytes_per_request > 0) {
    out += fmt::format("  (+ {} state bytes per request)", e.state_bytes_per_request);
  }
  if (e.kv_heads_replicated) out += "  (KV heads replicated: fewer KV heads than TP ranks)";
  out += "\n\n";
  if (!e.engine_report.log_lines.empty()) {
    // Data-parallel ranks each print their own lines with the same figures.
    const uint32_t dp = e.settings.data_parallel_size;
    const std::string ranks =
        dp > 1 ? fmt::format(" on each of its {} data-parallel ranks (DP0 - DP{})", dp, dp - 1)
               : "";
    out += fmt::format("{} will log{}{}:\n", engine, ranks,
                       e.start_failure.empty() ? "" : ", before it stops");
    for (const auto& line : e.engine_report.log_lines)
      out += "  " + line + "\n";
    out += "\n";
  }
  if (!e.start_failure.empty()) {
    out += fmt::format("{} does not start: it runs out of memory in {}.\n\n",
                       engines::engine_name(s.engine), e.start_failure);
  }
  Table rows({"context", "concurrency", "KV needed GiB", "KV capacity GiB", "margin GiB",
              "max conc. at ctx", "verdict", "risk", "note"});
  for (const auto& r : e.rows) {
    rows.add_row({std::to_string(r.context_tokens), std::to_string(r.concurrency),
                  gib(r.kv_needed_bytes), gib(r.kv_capacity_bytes), signed_gib(r.margin_bytes),
                  std::to_string(estimate::max_concurrency_at(e, r.context_tokens)),
                  estimate::verdict_text(r.verdict), r.risk, r.note});
  }
  out += rows.render();
  out += fmt::format("\nVerdict: {} ({}headroom {} GiB, confidence {})\n",
                     upper(estimate::verdict_text(e.verdict)),
                     e.start_failure.empty() ? "" : "dies in " + e.start_failure + "; ",
                     signed_gib(e.headroom_bytes), e.confidence);
  for (const auto& w : e.warnings)
    out += "warning: " + w + "\n";
  return out;
}

nlohmann::json recommendations_json(const std::vector<estimate::Recommendation>& recs,
                                    uint64_t context_tokens) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : recs) {
    list.push_back(
        {{"gpu", r.gpu.id},
         {"gpu_name", r.gpu.name},
         {"gpu_count", r.gpu_count},
         {"tensor_parallel_size", r.tp},
         {"pipeline_parallel_size", r.pp},
         {"kv_cache_tokens", r.estimate.engine_report.kv_cache_tokens},
         {"max_concurrency_at_context", estimate::max_concurrency_at(r.estimate, context_tokens)},
         {"headroom_bytes", r.estimate.headroom_bytes},
         {"verdict", estimate::verdict_name(r.estimate.verdict)},
         {"engine_flags", estimate::recommendation_flags(r.estimate.settings.engine, r.tp, r.pp)}});
  }
  return {{"schema_version", k_estimate_schema_version},
          {"kind", "recommendation"},
          {"context_tokens", context_tokens},
          {"options", list}};
}

std::string recommendations_text(const std::vector<estimate::Recommendation>& recs,
                                 uint64_t context_tokens, size_t max_rows) {
  if (recs.empty()) {
    return "No catalog GPU fits this deployment on 1, 2, 4, 8 or 16 GPUs (two nodes of 8).\n";
  }
  Table t({"GPU", "count", "TP", "PP", "KV tokens", fmt::format("max conc. @ {}", context_tokens),
           "headroom GiB", "verdict", "engine flags"});
  const size_t shown = max_rows == 0 ? recs.size() : std::min(max_rows, recs.size());
  for (size_t i = 0; i < shown; ++i) {
    const auto& r = recs[i];
    t.add_row({r.gpu.id, std::to_string(r.gpu_count), std::to_string(r.tp), std::to_string(r.pp),
               std::to_string(r.estimate.engine_report.kv_cache_tokens),
               std::to_string(estimate::max_concurrency_at(r.estimate, context_tokens)),
               signed_gib(r.estimate.headroom_bytes), estimate::verdict_text(r.estimate.verdict),
               estimate::recommendation_flags(r.estimate.settings.engine, r.tp, r.pp)});
  }
  std::string out =
      fmt::format("{} GPU type{} fit, fewest GPUs first, then least memory per GPU:\n", recs.size(),
                  recs.size() == 1 ? "" : "s") +
      t.render();
  if (shown < recs.size()) {
    out += fmt::format("{} more fit; --all shows them\n", recs.size() - shown);
  }
  return out;
}

}  // namespace kvprof::report::text
