// summary.json, manifest.json, request_trace.csv and the terminal table of a bench run.
#include "kvprof/bench/bench_summary.hpp"

#include <fmt/format.h>

#include <ctime>
#include <fstream>

#include "kvprof/bench/bench_compare.hpp"
#include "kvprof/bench/bench_estimate.hpp"
#include "kvprof/client/stats.hpp"
#include "kvprof/report/text/table.hpp"
#include "kvprof/results/summary_layout.hpp"
#include "kvprof/sys/host_info.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/time_text.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::bench {
using nlohmann::json;
namespace {

// -ot/--cpu-moe/--n-cpu-moe as llama.cpp takes them: "PATTERN=BUFFER_TYPE", in order.
json override_texts(const llama::LlamaSettings& e) {
  json out = json::array();
  for (const auto& [pattern, buffer] : e.tensor_overrides)
    out.push_back(pattern + "=" + buffer);
  return out;
}

std::string mib(const std::optional<uint64_t>& v) {
  return v ? fmt::format("{:.1f}", static_cast<double>(*v) / k_mib) : "-";
}

const PhaseMemory* find_phase(const BenchReport& r, std::string_view name) {
  for (const auto& p : r.phases)
    if (p.name == name) return &p;
  return nullptr;
}

// Per-condition figures derived from the requests and steps.
struct ConditionFigures {
  client::Percentiles ttft_ms, e2e_ms, itl_ms;
  double output_tokens = 0;
  double total_tokens_per_s = 0;        // output tokens of all sequences / wall time
  double per_request_tokens_per_s = 0;  // mean over requests: output tokens / e2e
  double llama_share = 0;               // llama.cpp's own decode time / kvprof's wall time
};

ConditionFigures figures(const ConditionResult& c) {
  ConditionFigures f;
  std::vector<double> ttft, e2e, itl = c.step_ms;
  double rate_sum = 0;
  for (const auto& q : c.requests) {
    ttft.push_back(q.ttft_ms);
    e2e.push_back(q.e2e_ms);
    f.output_tokens += q.output_tokens;
    if (q.e2e_ms > 0) rate_sum += q.output_tokens / (q.e2e_ms / 1000.0);
  }
  f.ttft_ms = client::percentiles(ttft);
  f.e2e_ms = client::percentiles(e2e);
  f.itl_ms = client::percentiles(itl);
  if (!c.requests.empty()) f.per_request_tokens_per_s = rate_sum / c.requests.size();
  if (c.wall_ms > 0) {
    f.total_tokens_per_s = f.output_tokens / (c.wall_ms / 1000.0);
    f.llama_share = (c.llama_prompt_ms + c.llama_eval_ms) / c.wall_ms;
  }
  return f;
}

// Unmeasured is null, never 0: a condition cut short before its first token has no latency.
json percentiles_json(const client::Percentiles& p) {
  const auto v = [&](double x) { return p.n > 0 ? json(x) : json(nullptr); };
  return {{"p50", v(p.p50)},   {"p90", v(p.p90)}, {"p99", v(p.p99)},
          {"mean", v(p.mean)}, {"max", v(p.max)}, {"n", p.n}};
}

// A rate over a condition's wall time; null when nothing was measured (never 0 tok/s).
json rate_json(double value, bool measured) {
  return measured ? json(value) : json(nullptr);
}

// A part of the breakdown; only overhead, the residual, can be below zero.
results::PartFigures part(std::optional<int64_t> bytes, const char* confidence,
                          const char* method) {
  return {bytes, bytes ? confidence : "none", method};
}

// The measured breakdown of the largest condition: the process's growth since before the load
// into the buffers the engine states (reserved) and overhead, the residual — below zero where
// reserved pages were never touched — so that the parts add up to the growth.
json breakdown_json(const BenchReport& r, const json& plan_of_condition) {
  const ConditionResult* biggest = nullptr;
  for (const auto& c : r.conditions) {
    if (c.started &&
        (biggest == nullptr || c.condition.kv_tokens() >= biggest->condition.kv_tokens()))
      biggest = &c;
  }
  const EngineBuffers b = sum_buffers(biggest != nullptr ? biggest->breakdown : r.breakdown);
  const PhaseMemory* before = find_phase(r, "before_load");
  std::optional<uint64_t> growth;
  std::optional<uint64_t> peak =
      biggest != nullptr && biggest->peak_rss_bytes ? biggest->peak_rss_bytes : r.peak_rss_bytes;
  if (peak && before != nullptr && before->rss_bytes && *peak > *before->rss_bytes)
    growth = *peak - *before->rss_bytes;
  std::optional<int64_t> overhead;
  const uint64_t buffers = b.model_bytes + b.context_bytes + b.compute_bytes;
  if (growth && b.reported)
    overhead = static_cast<int64_t>(*growth) - static_cast<int64_t>(buffers);
  const auto reported = [&](uint64_t v) {
    return b.reported ? std::optional<int64_t>(static_cast<int64_t>(v)) : std::nullopt;
  };
  results::BreakdownFigures f;
  f.memory = "host";
  f.total_measured_bytes = growth;  // what the four parts add up to
  f.weights =
      part(reported(b.model_bytes), "high", "reported by engine: llama.cpp's model buffers");
  f.kv_cache =
      part(reported(b.context_bytes), "high", "reported by engine: llama.cpp's KV cache buffers");
  f.activations = part(reported(b.compute_bytes), "high",
                       "reported by engine: llama.cpp's compute buffers, reserved");
  f.overhead = part(overhead, "medium",
                    "peak RSS growth since before load, less the engine's buffers (mapped "
                    "weights count once touched; below zero: reserved pages never touched)");
  f.overall_confidence = overhead ? "medium" : "none";
  json j = results::breakdown_json(f);
  j["measured"] = "RSS growth of the engine process since before load";
  j["condition"] = biggest != nullptr ? json(biggest->condition.label) : json(nullptr);
  j["process_growth_bytes"] = opt_json(growth);
  j["estimate"] = plan_of_condition;
  j["host_growth_vs_estimate"] = growth && plan_of_condition.is_object()
                                     ? json(plan_of_condition["host_total_bytes"].get<double>() /
                                                static_cast<double>(*growth) -
                                            1.0)
                                     : json(nullptr);
  return j;
}

// memory_measurements as profile writes it, of the engine process's RSS: loaded and idle before
// any request (baseline: after the model and its first context), after the warmup and at its
// peak.
json measurements_json(const BenchReport& r) {
  const auto at_phase = [&](const char* name) -> std::optional<uint64_t> {
    const PhaseMemory* p = find_phase(r, name);
    return p != nullptr ? p->rss_bytes : std::nullopt;
  };
  const auto capture = [](std::optional<uint64_t> bytes, const char* what) {
    if (!bytes) return json(nullptr);
    json j = results::capture_total_json(*bytes);
    j["memory"] = "host";
    j["measured"] = what;
    return j;
  };
  auto baseline = at_phase("after_context");
  if (!baseline) baseline = at_phase("after_load");
  json j = {{"baseline", capture(baseline,
                                 "RSS of the engine process with the model and its "
                                 "first context, before any request")},
            {"post_warmup", capture(at_phase("after_warmup"), "RSS after the warmup")},
            {"peak", capture(r.peak_rss_bytes, "peak RSS of the engine process")}};
  results::add_memory_increase(j, baseline, r.peak_rss_bytes);
  return j;
}

}  // namespace

EngineBuffers sum_buffers(const json& breakdown) {
  EngineBuffers b;
  if (!breakdown.is_array()) return b;
  for (const auto& e : breakdown) {
    if (!e.is_object()) continue;
    b.reported = true;
    b.model_bytes += e.value("model_bytes", uint64_t{0});
    b.context_bytes += e.value("context_bytes", uint64_t{0});
    b.compute_bytes += e.value("compute_bytes", uint64_t{0});
  }
  return b;
}

bool lib_has_gpu(const json& lib) {
  if (!lib.contains("devices") || !lib["devices"].is_array()) return false;
  for (const auto& d : lib["devices"]) {
    if (d.is_object() && d.value("type", std::string()) == "gpu") return true;
  }
  return false;
}

json summary_json(const BenchConfig& config, const BenchReport& r) {
  const auto spec = bench_model_spec(config);
  const model::ModelSpec* model = spec ? &*spec : nullptr;
  const bool has_gpu = lib_has_gpu(r.lib);
  json conditions = json::array();
  json biggest_plan = nullptr;
  uint64_t biggest_tokens = 0;
  double e2e_sum_ms = 0, wall_s = 0;
  uint64_t n_ok = 0, n_planned = 0, output_tokens = 0;
  for (const auto& c : r.conditions) {
    const auto f = figures(c);
    const EngineBuffers b = sum_buffers(c.breakdown);
    json plan = c.started ? bench_plan_json(config, model, has_gpu, c.n_ctx, c.n_seq_max) : json();
    if (c.started && c.condition.kv_tokens() >= biggest_tokens) {
      biggest_tokens = c.condition.kv_tokens();
      biggest_plan = plan;
    }
    if (c.started) {
      for (const auto& q : c.requests)
        e2e_sum_ms += q.e2e_ms;
      n_ok += c.requests.size();
      output_tokens += static_cast<uint64_t>(f.output_tokens);
      wall_s += c.wall_ms / 1000.0;
    }
    n_planned += c.condition.concurrency;
    conditions.push_back(
        {{"index", c.condition.index},
         {"condition_id", c.condition.label},
         {"status", c.finished  ? "completed"
                    : c.started ? "interrupted"
                                : "not_started"},
         {"concurrency", c.condition.concurrency},
         {"prompt_tokens", c.condition.prompt_tokens},
         {"gen_tokens", c.condition.gen_tokens},
         {"started", c.started},
         {"finished", c.finished},
         {"n_ctx", c.n_ctx},
         {"n_seq_max", c.n_seq_max},
         {"n_requests", c.requests.size()},
         {"n_ok", c.requests.size()},
         {"n_errors", 0},
         {"kv_cache_bytes", b.reported ? json(b.context_bytes) : json(nullptr)},
         {"compute_buffer_bytes", b.reported ? json(b.compute_bytes) : json(nullptr)},
         {"engine_buffers", c.breakdown},
         {"estimate", plan},
         {"rss_after_context_bytes", opt_json(c.start_rss_bytes)},
         {"peak_rss_bytes", opt_json(c.peak_rss_bytes)},
         {"peak_pss_bytes", opt_json(c.peak_pss_bytes)},
         {"end_rss_bytes", opt_json(c.end_rss_bytes)},
         {"peak_gpu_used_bytes", opt_json(c.peak_gpu_used_bytes)},
         {"wall_ms", c.wall_ms},
         {"start_mono_ns", c.start_mono_ns},
         {"end_mono_ns", c.end_mono_ns},
         {"output_tokens", f.output_tokens},
         {"duration_s", c.wall_ms / 1000.0},
         {"output_tokens_per_s",
          rate_json(f.total_tokens_per_s, c.wall_ms > 0 && f.output_tokens > 0)},
         {"mean_tokens_per_second_per_request",
          rate_json(f.per_request_tokens_per_s, !c.requests.empty())},
         {"llama_cpp_decode_ms", c.llama_prompt_ms + c.llama_eval_ms},
         {"llama_cpp_share_of_wall", rate_json(f.llama_share, c.wall_ms > 0)},
         {"ttft_ms", percentiles_json(f.ttft_ms)},
         {"itl_ms", percentiles_json(f.itl_ms)},
         {"e2e_ms", percentiles_json(f.e2e_ms)}});
  }
  json phases = json::object();
  for (const auto& p : r.phases)
    phases[p.name] = {{"rss_bytes", opt_json(p.rss_bytes)},
                      {"pss_bytes", opt_json(p.pss_bytes)},
                      {"t_mono_ns", p.t_mono_ns}};
  const auto& e = config.engine;
  json summary = {
      {"kind", "bench"},
      {"run_id", r.run_id},
      {"run_dir", r.run_dir},
      {"status", r.status},
      {"error", r.error.empty() ? json(nullptr) : json(r.error)},
      {"interrupted", r.status == "interrupted"},
      {"started_unix_s", r.started_unix_s},
      {"duration_s", r.ended_unix_s - r.started_unix_s},
      {"metadata",
       {{"started_at", iso_utc(r.started_unix_s)},
        {"ended_at", iso_utc(r.ended_unix_s)},
        {"started_unix_s", r.started_unix_s},
        {"duration_s", r.ended_unix_s - r.started_unix_s},
        {"run_dir", r.run_dir}}},
      {"engine", {{"name", "llama.cpp"}, {"in_process", true}, {"library", r.lib}}},
      {"engine_metadata",
       {{"engine_type", "llamacpp"},
        {"engine_version", r.lib.contains("llama_version") ? r.lib["llama_version"] : json()},
        {"simulated", false}}},
      {"model_info", r.model},
      {"settings",
       {{"model", e.model_path},
        {"n_gpu_layers", e.n_gpu_layers},
        {"ctx_size", config.context_per_condition() ? json("per condition") : json(e.n_ctx)},
        {"parallel", config.context_per_condition() ? json("per condition") : json(e.n_seq_max)},
        {"batch_size", e.n_batch},
        {"ubatch_size", e.n_ubatch},
        {"flash_attn", llama::flash_attn_name(e.flash_attn)},
        {"cache_type_k", e.cache_type_k},
        {"cache_type_v", e.cache_type_v},
        {"mmap", e.use_mmap},
        {"swa_full", e.swa_full},
        {"tensor_overrides", override_texts(e)},
        {"gen_tokens", config.gen_tokens},
        {"seed", config.seed}}},
      {"memory_source", r.memory_source},
      {"memory_measurements", measurements_json(r)},
      {"host_memory",
       {{"phases", phases},
        {"peak_rss_bytes", opt_json(r.peak_rss_bytes)},
        {"peak_pss_bytes", opt_json(r.peak_pss_bytes)}}},
      {"engine_reported", r.breakdown},
      {"memory_breakdown", breakdown_json(r, biggest_plan)},
      {"estimate_comparison", r.estimate_comparison},
      {"conditions", conditions},
      {"requests",
       {{"n_planned", n_planned},
        {"n_requests", n_ok},
        {"n_ok", n_ok},
        {"n_errors", 0},
        {"output_tokens", output_tokens}}},
      {"latency_stats", results::latency_totals_json(e2e_sum_ms, n_ok, output_tokens, wall_s)},
      {"warnings", r.warnings},
      {"engine_last_log_lines", r.last_log_lines},
      {"files", r.files}};
  results::add_versions(summary, k_bench_schema_version);
  return summary;
}

json manifest_json(const BenchConfig& config, const BenchReport& r) {
  const auto os = sys::read_os_info();
  const auto cpu = sys::read_cpu_info();
  const auto mem = sys::read_mem_info();
  return {{"schema_version", 1},
          {"kind", "bench"},
          {"run_id", r.run_id},
          {"status", r.status},
          {"kvprof_version", KVPROF_VERSION},
          {"started_unix_s", r.started_unix_s},
          {"host",
           {{"os", os.pretty_name.value_or(os.kernel_name)},
            {"kernel", os.kernel_release},
            {"cpu", cpu.model.value_or("")},
            {"logical_cores", cpu.logical_cores},
            {"memory_bytes", mem.total_bytes ? json(*mem.total_bytes) : json(nullptr)}}},
          {"engine", r.lib},
          {"model", config.model_label},
          {"model_path", config.engine.model_path},
          {"memory_source", r.memory_source},
          {"files", r.files}};
}

Expected<void> write_request_trace(const std::filesystem::path& path, const BenchReport& r) {
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "condition,concurrency,seq,prompt_tokens,output_tokens,ttft_ms,e2e_ms\n";
    for (const auto& c : r.conditions) {
      for (const auto& q : c.requests) {
        out << fmt::format("{},{},{},{},{},{:.3f},{:.3f}\n", c.condition.label,
                           c.condition.concurrency, q.seq, q.prompt_tokens, q.output_tokens,
                           q.ttft_ms, q.e2e_ms);
      }
    }
    out.flush();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return fail(ErrorKind::io, fmt::format("cannot write {}", path.string()));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return fail(ErrorKind::io, fmt::format("cannot write {}: {}", path.string(), ec.message()));
  return {};
}

std::string summary_text(const BenchConfig& config, const BenchReport& r) {
  std::string out;
  out +=
      fmt::format("engine: llama.cpp {} ({}), CPU backend {}\n", r.lib.value("llama_version", "?"),
                  r.lib.value("package", "?"), r.lib.value("cpu_backend", "?"));
  const std::string model_name = r.model.value("name", "");
  const std::string description = r.model.value("description", config.model_label);
  out += model_name.empty()
             ? fmt::format("model: {} ({})\n\n", description, config.engine.model_path)
             : fmt::format("model: {} (llama.cpp: {}; {})\n\n", model_name, description,
                           config.engine.model_path);
  report::text::Table t({"condition", "n_ctx", "requests", "TTFT p50 (ms)", "ITL p50 (ms)",
                         "E2E p90 (ms)", "tok/s total", "tok/s/req", "KV (MiB)", "compute (MiB)",
                         "peak RSS (MiB)"});
  for (const auto& c : r.conditions) {
    if (!c.started) continue;
    const auto f = figures(c);
    const EngineBuffers b = sum_buffers(c.breakdown);
    // "-" for what was not measured (a condition cut short before its tokens), never 0.
    const auto ms = [](const client::Percentiles& p, double v, const char* format) {
      return p.n > 0 ? fmt::format(fmt::runtime(format), v) : std::string("-");
    };
    const bool rated = c.wall_ms > 0 && f.output_tokens > 0;
    t.add_row({c.condition.label + (c.finished ? "" : " (cut short)"), std::to_string(c.n_ctx),
               fmt::format("{}/{}", c.requests.size(), c.condition.concurrency),
               ms(f.ttft_ms, f.ttft_ms.p50, "{:.1f}"), ms(f.itl_ms, f.itl_ms.p50, "{:.2f}"),
               ms(f.e2e_ms, f.e2e_ms.p90, "{:.1f}"),
               rated ? fmt::format("{:.1f}", f.total_tokens_per_s) : "-",
               c.requests.empty() ? "-" : fmt::format("{:.1f}", f.per_request_tokens_per_s),
               b.reported ? mib(b.context_bytes) : "-", b.reported ? mib(b.compute_bytes) : "-",
               mib(c.peak_rss_bytes)});
  }
  out += t.render();
  out += "\nhost memory of the engine process (RSS, MiB):";
  for (const auto& p : r.phases)
    out += fmt::format(" {} {}", p.name, mib(p.rss_bytes));
  out += "\n";
  const json summary = summary_json(config, r);
  const json& bd = summary["memory_breakdown"];
  const json& plan = bd["estimate"];
  out += fmt::format("\nmeasured breakdown ({}, {}):\n", bd.value("measured", ""),
                     bd["condition"].is_string() ? bd["condition"].get<std::string>() : "-");
  report::text::Table bt({"component", "MiB", "estimate MiB", "confidence", "how"});
  const std::pair<const char*, const char*> rows[] = {{"weights", "weights_bytes"},
                                                      {"kv_cache", "kv_cache_bytes"},
                                                      {"activations", "compute_bytes"},
                                                      {"overhead", ""}};
  for (const auto& [name, plan_key] : rows) {
    const auto& c = bd["components"][name];
    const bool planned = plan.is_object() && *plan_key != '\0';
    bt.add_row({name,
                c["bytes"].is_number()
                    ? fmt::format("{:.1f}", c["bytes"].get<double>() / (1024.0 * 1024.0))
                    : "-",
                planned ? mib(plan[plan_key].get<uint64_t>()) : "-", c.value("confidence", ""),
                c.value("method", "")});
  }
  out += bt.render();
  if (plan.is_object() && bd["process_growth_bytes"].is_number()) {
    out += fmt::format("process grew {} MiB; planned host RAM {} MiB ({:+.1f}%)\n",
                       mib(bd["process_growth_bytes"].get<uint64_t>()),
                       mib(plan["host_total_bytes"].get<uint64_t>()),
                       bd["host_growth_vs_estimate"].get<double>() * 100.0);
  }
  if (config.estimate_with) out += estimate_comparison_text(summary["estimate_comparison"]);
  if (r.status != "completed") {
    out += fmt::format("\nstatus: {}: {}\n", r.status, r.error);
    for (const auto& line : r.last_log_lines)
      out += "  engine: " + line + "\n";
  }
  out += fmt::format("\nresults: {}\n", r.run_dir);
  return out;
}

}  // namespace kvprof::bench
