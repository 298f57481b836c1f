// A bench run against a plan (see bench_compare.hpp).
#include "kvprof/bench/bench_compare.hpp"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "kvprof/bench/bench_estimate.hpp"
#include "kvprof/bench/bench_summary.hpp"
#include "kvprof/engines/llamacpp/llamacpp.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/report/text/table.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::bench {
namespace {

using nlohmann::json;

constexpr double k_cause_threshold_pct = 10.0;

// What a setting decides, as bits.
enum Affects : unsigned {
  k_weights = 1,
  k_kv = 2,
  k_compute = 4,
  k_cells = 8,
  k_host = 16,  // the process's growth beyond the buffers (resident weights)
  k_all = 31,
};

struct SettingDiff {
  std::string text;  // "ctx_size 8192 (the run: 512)"
  unsigned affects = 0;
};

// The largest condition that started (the one memory_breakdown shows).
const ConditionResult* largest_started(const BenchReport& r) {
  const ConditionResult* biggest = nullptr;
  for (const auto& c : r.conditions) {
    if (c.started &&
        (biggest == nullptr || c.condition.kv_tokens() >= biggest->condition.kv_tokens()))
      biggest = &c;
  }
  return biggest;
}

std::string cache_type_text(uint32_t type) {
  static constexpr std::pair<uint32_t, const char*> k_names[] = {
      {0, "f32"},  {1, "f16"},  {30, "bf16"}, {8, "q8_0"},   {2, "q4_0"},
      {3, "q4_1"}, {6, "q5_0"}, {7, "q5_1"},  {20, "iq4_nl"}};
  for (const auto& [id, name] : k_names)
    if (id == type) return name;
  return std::to_string(type);
}

std::string gpu_layers_text(const engines::LlamaCppSettings& s) {
  if (!s.has_gpu) return "0 (no GPU)";
  return std::to_string(s.n_gpu_layers);
}

// The settings where the plan and the run differ, each with what it decides.
std::vector<SettingDiff> setting_diffs(const engines::LlamaCppSettings& plan,
                                       const engines::LlamaCppSettings& run,
                                       const std::string& plan_model,
                                       const std::string& run_model) {
  std::vector<SettingDiff> out;
  const auto add = [&out](const char* name, const std::string& planned, const std::string& ran,
                          unsigned affects) {
    if (planned != ran)
      out.push_back({fmt::format("{} {} (the run: {})", name, planned, ran), affects});
  };
  add("model", plan_model, run_model, k_all);
  add("ctx_size", std::to_string(plan.n_ctx), std::to_string(run.n_ctx),
      k_kv | k_compute | k_cells);
  add("parallel", std::to_string(plan.n_seq_max), std::to_string(run.n_seq_max),
      k_kv | k_compute | k_cells);
  add("cache_type_k", cache_type_text(plan.type_k), cache_type_text(run.type_k), k_kv);
  add("cache_type_v", cache_type_text(plan.type_v), cache_type_text(run.type_v), k_kv);
  add("flash_attn", plan.flash_attn ? "on" : "off", run.flash_attn ? "on" : "off", k_compute);
  add("batch_size", std::to_string(plan.n_batch), std::to_string(run.n_batch), k_compute);
  add("ubatch_size", std::to_string(plan.n_ubatch), std::to_string(run.n_ubatch), k_compute);
  add("swa_full", plan.swa_full ? "true" : "false", run.swa_full ? "true" : "false",
      k_kv | k_cells);
  add("kv_unified", plan.kv_unified ? "true" : "false", run.kv_unified ? "true" : "false",
      k_kv | k_compute | k_cells);
  add("n_gpu_layers", gpu_layers_text(plan), gpu_layers_text(run), k_weights | k_compute);
  add("mmap", plan.use_mmap ? "true" : "false", run.use_mmap ? "true" : "false", k_host);
  return out;
}

// The run's own settings of condition `c` as the planner's input, and how to read them back.
estimate::EstimateInput own_input(const BenchConfig& config, const model::ModelSpec& spec,
                                  bool has_gpu, const ConditionResult& c,
                                  engines::AssumptionSources& sources, std::string& flags) {
  const auto& e = config.engine;
  estimate::EstimateInput in;
  in.model = spec;
  auto& s = in.settings;
  s.engine = engines::Engine::llamacpp;
  s.max_model_len = c.n_ctx;
  s.n_parallel = c.n_seq_max;
  s.n_batch = e.n_batch;
  s.n_ubatch = e.n_ubatch;
  s.flash_attn = e.flash_attn != llama::FlashAttn::off;
  s.cache_type_k = e.cache_type_k;
  s.cache_type_v = e.cache_type_v;
  s.no_gpu = !has_gpu;
  if (e.n_gpu_layers >= 0) s.n_gpu_layers = static_cast<uint32_t>(e.n_gpu_layers);
  s.use_mmap = e.use_mmap;
  s.swa_full = e.swa_full;
  s.kv_unified = e.kv_unified;
  s.llamacpp_outputs_per_slot = false;  // bench keeps libllama's default
  for (const auto& [pattern, buffer] : e.tensor_overrides)
    s.tensor_overrides.push_back({pattern, buffer});
  sources.given = {"max-model-len", "parallel",     "batch-size",   "ubatch-size",
                   "flash-attn",    "cache-type-k", "cache-type-v", "n-gpu-layers",
                   "no-mmap",       "swa-full",     "no-kv-unified"};
  if (!has_gpu) {
    in.gpu = gpu::no_gpu();
    sources.gpu_origin = engines::GpuOrigin::detected;
    sources.gpu_note = "libllama has no GPU device";
  } else if (auto g = gpu::find_gpu(config.gpu_name); g && !config.gpu_name.empty()) {
    in.gpu = *g;
    sources.gpu_origin = engines::GpuOrigin::detected;
    sources.gpu_note = "from nvml";
  } else {
    in.gpu = gpu::find_gpu("H100").value_or(gpu::custom_gpu(80ULL << 30));
    sources.gpu_origin = engines::GpuOrigin::assumed;
    sources.gpu_note = config.gpu_name.empty()
                           ? std::string("NVML names no GPU")
                           : fmt::format("'{}' is not in kvprof's GPU catalog", config.gpu_name);
  }
  flags =
      fmt::format("-c {} -np {} -b {} -ub {} -fa {} -ctk {} -ctv {} -ngl {}{}{}{}", c.n_ctx,
                  c.n_seq_max, e.n_batch, e.n_ubatch, s.flash_attn ? "on" : "off", e.cache_type_k,
                  e.cache_type_v, e.n_gpu_layers, e.use_mmap ? "" : " --no-mmap",
                  e.swa_full ? " --swa-full" : "", e.kv_unified ? "" : " --no-kv-unified");
  for (const auto& [pattern, buffer] : e.tensor_overrides)
    flags += fmt::format(" -ot {}={}", pattern, buffer);
  flags += " (the run's own settings)";
  return in;
}

json row_json(const char* component, const char* unit, std::optional<double> measured,
              std::optional<double> estimated, const char* confidence) {
  std::optional<double> error_pct;
  if (measured && estimated && *measured > 0)
    error_pct = (*estimated - *measured) / *measured * 100.0;
  const auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {{"component", component},      {"unit", unit},
          {"measured", opt(measured)},   {"estimated", opt(estimated)},
          {"error_pct", opt(error_pct)}, {"measured_confidence", measured ? confidence : "none"}};
}

unsigned affects_of(std::string_view component) {
  if (component == "weights") return k_weights;
  if (component == "kv_cache") return k_kv;
  if (component == "activations") return k_compute;
  if (component == "kv_cache_tokens") return k_cells;
  return k_all;  // total
}

// The cause of a row beyond the threshold when the settings match the run's.
std::string model_cause(std::string_view component, const engines::LlamaCppPlan& plan,
                        const std::string& version) {
  const std::string ran = version.empty() ? "" : fmt::format("; llama.cpp {} ran", version);
  if (component == "activations") {
    return fmt::format(
        "kvprof's compute-buffer model (its largest stage: {}); the settings match the run's{}",
        plan.compute_stage.empty() ? "?" : plan.compute_stage, ran);
  }
  if (component == "total") {
    return "the process's memory outside llama.cpp's buffers (runtime, mapped weights not yet "
           "read); the settings match the run's" +
           ran;
  }
  return fmt::format("kvprof's plan of llama.cpp's {} buffers; the settings match the run's{}",
                     component, ran);
}

std::vector<std::string> likely_causes(const json& rows, const std::vector<SettingDiff>& diffs,
                                       const engines::LlamaCppPlan& plan,
                                       const std::string& version) {
  std::vector<std::string> out;
  for (const auto& row : rows) {
    if (!row["error_pct"].is_number()) continue;
    const double pct = row["error_pct"].get<double>();
    if (std::fabs(pct) <= k_cause_threshold_pct) continue;
    const std::string name = row["component"].get<std::string>();
    std::string named;
    for (const auto& d : diffs) {
      if ((d.affects & affects_of(name)) == 0) continue;
      named += (named.empty() ? "" : ", ") + d.text;
    }
    const std::string cause =
        named.empty() ? model_cause(name, plan, version)
                      : "the plan's settings differ from the run's: " + named +
                            "; give the run's settings in --estimate-with to check the plan itself";
    out.push_back(fmt::format("{}: {:+.1f}%; likely cause: {}", name, pct, cause));
  }
  return out;
}

}  // namespace

json estimate_comparison_json(const BenchConfig& config, const BenchReport& r,
                              std::vector<std::string>& warnings) {
  const ConditionResult* c = largest_started(r);
  if (c == nullptr) return nullptr;
  const auto spec = bench_model_spec(config);
  if (!spec) return nullptr;
  const bool has_gpu = lib_has_gpu(r.lib);
  const bool given = config.estimate_with.has_value();
  const auto warn = [&](const Error& e) {
    if (given) warnings.push_back("--estimate-with: " + e.message);
    return json(nullptr);
  };
  engines::AssumptionSources sources;
  std::string flags;
  estimate::EstimateInput input;
  if (given) {
    auto in = config.estimate_with->make_input(has_gpu, sources);
    if (!in) return warn(in.error());
    input = std::move(*in);
    flags = config.estimate_with->flags;
  } else {
    input = own_input(config, *spec, has_gpu, *c, sources, flags);
  }
  const auto est = engines::plan(input);
  if (!est) return warn(est.error());
  const auto settings = engines::llamacpp_settings(est->settings);
  if (!settings) return warn(settings.error());
  const auto plan = engines::plan_llamacpp(input.model, *settings);
  if (!plan) return warn(plan.error());
  const auto& p = *plan;
  const auto run_settings = run_planner_settings(config, has_gpu, c->n_ctx, c->n_seq_max);
  if (!run_settings) return nullptr;

  const EngineBuffers b = sum_buffers(c->breakdown);
  const auto reported = [&](uint64_t v) {
    return b.reported ? std::optional<double>(static_cast<double>(v)) : std::nullopt;
  };
  std::optional<double> growth;
  const std::optional<uint64_t> peak = c->peak_rss_bytes ? c->peak_rss_bytes : r.peak_rss_bytes;
  for (const auto& phase : r.phases) {
    if (phase.name == "before_load" && phase.rss_bytes && peak && *peak > *phase.rss_bytes)
      growth = static_cast<double>(*peak - *phase.rss_bytes);
  }
  const auto d = [](uint64_t v) { return static_cast<double>(v); };
  json rows = json::array();
  rows.push_back(row_json(
      "weights", "bytes", reported(b.model_bytes),
      d(p.model_mapped_bytes + p.model_host_bytes + p.model_repack_bytes + p.model_gpu_bytes),
      "high"));
  rows.push_back(row_json("kv_cache", "bytes", reported(b.context_bytes),
                          d(p.kv.host_bytes + p.kv.gpu_bytes), "high"));
  rows.push_back(row_json("activations", "bytes", reported(b.compute_bytes),
                          d(p.compute.host_bytes + p.compute.gpu_bytes), "high"));
  rows.push_back(row_json("total", "bytes", growth, d(p.host_total_bytes), "medium"));
  rows.push_back(row_json("kv_cache_tokens", "tokens",
                          c->n_ctx > 0 ? std::optional<double>(c->n_ctx) : std::nullopt,
                          d(p.kv_cells), "high"));
  const auto diffs = setting_diffs(*settings, *run_settings, est->model_id, spec->id);
  return {{"estimate_flags", flags},
          {"rows", rows},
          {"nature", "measured"},
          {"assumptions", engines::estimate_assumptions(*est, sources)},
          {"likely_causes",
           likely_causes(rows, diffs, p, r.lib.value("llama_version", std::string()))}};
}

std::string estimate_comparison_text(const json& cmp) {
  if (!cmp.is_object()) return "";
  std::string out = fmt::format("\nestimate check ({}):\n", cmp.value("estimate_flags", ""));
  report::text::Table t({"component", "measured", "estimated", "error %", "confidence"});
  for (const auto& row : cmp["rows"]) {
    const bool bytes = row.value("unit", "") == "bytes";
    const auto value = [bytes](const json& v) {
      if (!v.is_number()) return std::string("-");
      return bytes ? fmt::format("{:.1f} MiB", v.get<double>() / k_mib)
                   : fmt::format("{:.0f}", v.get<double>());
    };
    t.add_row({row.value("component", ""), value(row["measured"]), value(row["estimated"]),
               row["error_pct"].is_number() ? fmt::format("{:+.1f}", row["error_pct"].get<double>())
                                            : "-",
               row.value("measured_confidence", "")});
  }
  out += t.render();
  out += engines::assumptions_text(cmp["assumptions"]);
  for (const auto& line : cmp["likely_causes"])
    out += "estimate check: " + line.get<std::string>() + "\n";
  return out;
}

}  // namespace kvprof::bench
