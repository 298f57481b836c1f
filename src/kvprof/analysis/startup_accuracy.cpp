// Runs the estimator over recorded engine startups and measures per-figure error.
#include "kvprof/analysis/startup_accuracy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "kvprof/engines/registry.hpp"
#include "kvprof/engines/vllm/budget.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/model/catalog.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::analysis {
namespace {

constexpr size_t k_max_line_bytes = 1 << 20;

std::optional<double> number(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j.at(key).is_number()) return std::nullopt;
  return j.at(key).get<double>();
}

RecordResult run_one(const nlohmann::json& r) {
  RecordResult out;
  out.id = r.value("id", "?");
  out.model = r.value("model", "?");
  auto model = model::catalog_model(out.model);
  if (!model) {
    out.error = model.error().message;
    return out;
  }
  estimate::EstimateInput in;
  in.model = std::move(*model);
  auto gpu = gpu::find_gpu(r.value("gpu", "H100"));
  if (!gpu) gpu = gpu::find_gpu("H100");
  in.gpu = *gpu;
  if (auto gib = number(r, "gpu_total_memory_gib")) in.gpu.memory_bytes = gib_to_bytes(*gib);
  auto& s = in.settings;
  const auto engine = engines::parse_planned_engine(r.value("engine", std::string("vllm")));
  if (!engine) {
    out.error = engine.error().message;
    return out;
  }
  s.engine = *engine;
  s.tensor_parallel_size = r.value("tensor_parallel_size", 1U);
  s.pipeline_parallel_size = r.value("pipeline_parallel_size", 1U);
  s.data_parallel_size = r.value("data_parallel_size", 1U);
  s.enable_expert_parallel = r.value("enable_expert_parallel", false);
  s.enable_dp_attention = r.value("enable_dp_attention", false);
  s.expert_parallel_size = r.value("expert_parallel_size", 1U);
  s.enable_dp_lm_head = r.value("enable_dp_lm_head", false);
  if (auto v = number(r, "moe_dense_tp_size")) s.moe_dense_tp_size = static_cast<uint32_t>(*v);
  const bool fraction_given = r.value("gpu_memory_utilization_given", true);
  const auto fraction = number(r, "gpu_memory_utilization");
  if (fraction && fraction_given) s.gpu_memory_utilization = *fraction;
  if (auto v = number(r, "max_model_len")) s.max_model_len = static_cast<uint64_t>(*v);
  if (auto v = number(r, "max_input_tokens")) s.max_input_tokens = static_cast<uint64_t>(*v);
  if (auto v = number(r, "block_size")) s.block_size = static_cast<uint32_t>(*v);
  // The batch the engine printed where it is not the server's default (vLLM's offline LLM
  // class profiles 8192 tokens on small GPUs).
  if (auto v = number(r, "max_num_batched_tokens")) {
    s.max_num_batched_tokens = static_cast<uint32_t>(*v);
  }
  if (auto v = number(r, "max_num_seqs")) s.max_num_seqs = static_cast<uint32_t>(*v);
  if (r.contains("kv_transfer_config") && r.at("kv_transfer_config").is_string()) {
    s.kv_transfer_config = r.at("kv_transfer_config").get<std::string>();
  }
  if (r.contains("dtype") && r.at("dtype").is_string()) {
    s.dtype = model::parse_dtype(r.at("dtype").get<std::string>());
  }
  if (r.contains("quantization") && r.at("quantization").is_string()) {
    s.quantization = r.at("quantization").get<std::string>();
  }
  if (r.contains("kv_cache_dtype") && r.at("kv_cache_dtype").is_string()) {
    auto kv = estimate::parse_kv_cache_dtype(r.at("kv_cache_dtype").get<std::string>());
    if (kv) s.kv_cache_dtype = *kv;
  }
  // The release whose rules the record is held to (none: the newest modelled).
  if (r.contains("engine_version_modelled") && r.at("engine_version_modelled").is_string()) {
    s.engine_version = r.at("engine_version_modelled").get<std::string>();
  }
  auto est = engines::plan(in);
  if (!est) {
    out.error = est.error().message;
    return out;
  }
  const auto& rep = est->engine_report;
  const auto& mb = est->per_gpu;
  auto add = [&](const char* key, double predicted) {
    if (auto actual = number(r, key)) out.figures.push_back({key, *actual, predicted});
  };
  if (fraction && !fraction_given) {
    out.figures.push_back({"memory_fraction", *fraction, rep.memory_fraction});
  }
  add("weights_gib", bytes_to_gib(mb.weights_bytes));
  add("activation_peak_gib", bytes_to_gib(mb.activation_bytes));
  add("non_torch_gib", bytes_to_gib(mb.non_torch_bytes));
  add("kv_cache_gib", bytes_to_gib(rep.available_kv_cache_bytes));
  add("num_gpu_blocks", static_cast<double>(rep.num_gpu_blocks));
  add("kv_cache_tokens", static_cast<double>(rep.kv_cache_tokens));
  add("max_concurrency", rep.max_concurrency);
  add("cuda_graph_gib", bytes_to_gib(mb.cuda_graph_bytes));
  // V0's swap space in blocks of the same size as the GPU's.
  if (rep.num_gpu_blocks > 0 && mb.kv_cache_bytes > 0) {
    const uint64_t bytes_per_block = mb.kv_cache_bytes / rep.num_gpu_blocks;
    add("num_cpu_blocks",
        static_cast<double>(engines::k_vllm_v0_swap_space_bytes / bytes_per_block));
  }
  return out;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return 0;
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const auto hi = static_cast<size_t>(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

double FigureError::error_pct() const {
  if (actual == 0) return predicted == 0 ? 0 : 100;
  return std::abs(predicted - actual) / std::abs(actual) * 100.0;
}

Expected<std::vector<RecordResult>> run_startup_accuracy(const std::filesystem::path& jsonl) {
  std::ifstream in(jsonl);
  if (!in) return fail(ErrorKind::io, fmt::format("cannot read '{}'", jsonl.string()));
  std::vector<RecordResult> out;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.size() > k_max_line_bytes) {
      return fail(ErrorKind::input, fmt::format("{}:{}: line too long", jsonl.string(), line_no));
    }
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return fail(ErrorKind::input,
                  fmt::format("{}:{}: not a JSON object", jsonl.string(), line_no));
    }
    out.push_back(run_one(j));
  }
  return out;
}

std::vector<FigureSummary> summarize(const std::vector<RecordResult>& results) {
  std::map<std::string, std::vector<std::pair<double, std::string>>> by_figure;
  std::vector<std::string> order;
  for (const auto& r : results) {
    for (const auto& f : r.figures) {
      if (!by_figure.contains(f.figure)) order.push_back(f.figure);
      by_figure[f.figure].emplace_back(f.error_pct(), r.id);
    }
  }
  std::vector<FigureSummary> out;
  for (const auto& name : order) {
    const auto& v = by_figure[name];
    std::vector<double> errs;
    FigureSummary s;
    s.figure = name;
    s.n = v.size();
    for (const auto& [e, id] : v) {
      errs.push_back(e);
      if (e >= s.max_pct) {
        s.max_pct = e;
        s.worst_record = id;
      }
    }
    s.median_pct = percentile(errs, 0.5);
    s.p90_pct = percentile(errs, 0.9);
    out.push_back(s);
  }
  return out;
}

std::optional<FigureSummary> find_summary(const std::vector<FigureSummary>& s,
                                          std::string_view figure) {
  for (const auto& f : s) {
    if (f.figure == figure) return f;
  }
  return std::nullopt;
}

}  // namespace kvprof::analysis
