// The report's experiment sections (see experiment_sections.hpp). The files are read leniently:
// a field that is missing or of another type is absent, never an exception.
#include "kvprof/report/html/experiment_sections.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "kvprof/report/html/figures.hpp"
#include "kvprof/report/html/run_data.hpp"
#include "kvprof/results/run_folder.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::report::html {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const json& field(const json& j, std::string_view key) {
  static const json null_json;
  if (!j.is_object()) return null_json;
  const auto it = j.find(key);
  return it == j.end() ? null_json : *it;
}

std::optional<double> number(const json& j, std::string_view key) {
  const json& v = field(j, key);
  if (!v.is_number()) return std::nullopt;
  const double d = v.get<double>();
  return std::isfinite(d) ? std::optional<double>(d) : std::nullopt;
}

std::string text_field(const json& j, std::string_view key) {
  const json& v = field(j, key);
  return v.is_string() ? v.get<std::string>() : std::string();
}

bool flag(const json& j, std::string_view key) {
  const json& v = field(j, key);
  return v.is_boolean() && v.get<bool>();
}

const json& array(const json& j, std::string_view key) {
  static const json empty = json::array();
  const json& v = field(j, key);
  return v.is_array() ? v : empty;
}

json scaled(std::optional<double> v, double scale, double digits = 1e4) {
  if (!v) return nullptr;
  return std::round(*v / scale * digits) / digits;
}

// A fraction as % with four decimals (small batches use a tiny part of a large pool).
double percent(double fraction) {
  return std::round(fraction * 1e6) / 1e4;
}

std::optional<uint32_t> length(const json& j, std::string_view key) {
  const auto v = number(j, key);
  if (!v || *v < 0 || *v > 1e9) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

// The peak memory a sweep measured: GPU memory where it was sampled, else the server's host RSS
// (a server on the CPU).
std::optional<double> peak_memory(const json& m) {
  if (auto gpu = number(m, "peak_used_bytes")) return gpu;
  return number(m, "peak_rss_bytes");
}

// One heatmap of a configuration: its conditions at one output length, input length x batch size.
json heatmap(const json& conditions, const json& measured, uint32_t output_len, double scale) {
  std::set<uint32_t> inputs, batches;
  for (const auto& c : conditions) {
    if (length(c, "output_len") != output_len) continue;
    const auto in = length(c, "input_len"), bs = length(c, "batch_size");
    if (!in || !bs) continue;
    inputs.insert(*in);
    batches.insert(*bs);
  }
  const std::vector<uint32_t> in_axis(inputs.begin(), inputs.end());
  const std::vector<uint32_t> bs_axis(batches.begin(), batches.end());
  json cells = json::array();
  for (const auto& c : conditions) {
    const auto in = length(c, "input_len"), bs = length(c, "batch_size");
    if (length(c, "output_len") != output_len || !in || !bs) continue;
    const std::string cid = workload::condition_id(*in, output_len, *bs, workload::PrefixMode::low);
    const json& m = field(measured, cid);
    const auto kv_needed = number(c, "kv_needed_bytes");
    const auto kv_capacity = number(c, "kv_capacity_bytes");
    const auto kv_usage = number(m, "peak_kv_cache_usage");
    cells.push_back({{"row", std::ranges::find(in_axis, *in) - in_axis.begin()},
                     {"col", std::ranges::find(bs_axis, *bs) - bs_axis.begin()},
                     {"condition", cid},
                     {"peak", scaled(peak_memory(m), scale)},
                     {"kv_pct", kv_usage ? json(percent(*kv_usage)) : json(nullptr)},
                     {"est_kv_pct", kv_needed && kv_capacity && *kv_capacity > 0
                                        ? json(percent(*kv_needed / *kv_capacity))
                                        : json(nullptr)},
                     {"fits", flag(c, "fits")},
                     {"errors", number(m, "n_errors").value_or(0)}});
  }
  return {{"output_len", output_len},
          {"input_lens", in_axis},
          {"batch_sizes", bs_axis},
          {"cells", cells}};
}

}  // namespace

json sweep_section(const json& sweep, const fs::path& dir) {
  const json& configs = array(sweep, "configurations");
  double max_bytes = 0;
  for (const auto& c : configs) {
    const json& est = field(c, "estimate");
    max_bytes = std::max(max_bytes, number(est, "per_gpu_total_bytes").value_or(0) *
                                        number(est, "gpus").value_or(1));
    const json& measured = field(field(c, "run"), "measured");
    max_bytes = std::max(max_bytes, peak_memory(measured).value_or(0));
    for (const auto& [id, m] : field(measured, "conditions").items())
      max_bytes = std::max(max_bytes, peak_memory(m).value_or(0));
  }
  const MemoryUnit unit = memory_unit(max_bytes);
  json out_configs = json::array();
  bool simulated = false, measured_any = false, gpu_any = false, host_any = false;
  for (const auto& c : configs) {
    const json& run = field(c, "run");
    const json& measured = field(run, "measured");
    const bool sim = text_field(c, "server") == "built-in simulator";
    simulated = simulated || sim;
    measured_any = measured_any || peak_memory(measured).has_value();
    gpu_any = gpu_any || number(measured, "peak_used_bytes").has_value();
    host_any = host_any || (!number(measured, "peak_used_bytes") &&
                            number(measured, "peak_rss_bytes").has_value());
    std::set<uint32_t> outputs;
    for (const auto& cond : array(c, "conditions"))
      if (const auto o = length(cond, "output_len")) outputs.insert(*o);
    json maps = json::array();
    for (const uint32_t o : outputs)
      maps.push_back(heatmap(array(c, "conditions"), field(measured, "conditions"), o, unit.bytes));
    const json& est = field(c, "estimate");
    const auto est_total = number(est, "per_gpu_total_bytes");
    const auto est_gpus = number(est, "gpus").value_or(1);
    out_configs.push_back(
        {{"id", text_field(c, "id")},
         {"label", text_field(c, "label")},
         {"model_id", text_field(c, "model_id")},
         {"gpu", text_field(c, "gpu")},
         {"gpus", est_gpus},
         {"server", text_field(c, "server")},
         {"simulated", sim},
         {"status", text_field(c, "status")},
         {"reason",
          !text_field(run, "reason").empty() ? text_field(run, "reason") : text_field(c, "reason")},
         {"run_id", text_field(run, "run_id")},
         {"run_dir", text_field(run, "run_dir")},
         {"estimate_total", est_total ? scaled(*est_total * est_gpus, unit.bytes) : json(nullptr)},
         {"measured_peak", scaled(peak_memory(measured), unit.bytes)},
         {"heatmaps", maps}});
  }
  // Host memory where only servers on the CPU were measured; GPU memory otherwise.
  const std::string memory_label = host_any && !gpu_any ? "host memory (RSS)"
                                   : host_any ? "memory (GPU; host RSS where no GPU was sampled)"
                                              : "GPU memory";
  json natures = json::array();
  natures.push_back({{"what", memory_label}, {"nature", simulated ? "simulated" : "measured"}});
  natures.push_back({{"what", "KV cache usage"}, {"nature", "engine-reported"}});
  natures.push_back({{"what", "KV needed"}, {"nature", "estimated"}});
  return {{"type", "sweep"},
          {"name", text_field(sweep, "name")},
          {"dir", dir.string()},
          {"status", text_field(sweep, "status")},
          {"config_file", text_field(sweep, "config_file")},
          {"unit", unit.name},
          {"simulated", simulated},
          {"measured_any", measured_any},
          {"memory_label", memory_label},
          {"natures", natures},
          {"configurations", out_configs}};
}

json find_max_section(const json& fm, const fs::path& dir) {
  json steps = json::array();
  for (const auto& s : array(fm, "steps")) {
    const json& o = field(s, "outcome");
    const auto pct = [&](const char* key) {
      const auto v = number(o, key);
      return v ? json(percent(*v)) : json(nullptr);
    };
    const auto opt = [&](const char* key) {
      const auto v = number(o, key);
      return v ? json(*v) : json(nullptr);
    };
    steps.push_back({{"step", number(s, "step").value_or(0)},
                     {"phase", text_field(s, "phase")},
                     {"concurrency", number(s, "concurrency").value_or(0)},
                     {"pass", flag(s, "pass")},
                     {"interrupted", flag(s, "interrupted")},
                     {"why", text_field(s, "why")},
                     {"wall_s", number(s, "wall_s").value_or(0)},
                     {"kv_pct", pct("peak_kv_cache_usage")},
                     {"memory_pct", pct("memory_frac")},
                     {"ttft_p99_ms", opt("ttft_p99_ms")},
                     {"itl_p99_ms", opt("itl_p99_ms")},
                     {"n_ok", opt("n_ok")},
                     {"n_errors", opt("n_errors")},
                     {"preemptions", opt("preemptions")},
                     {"queued", opt("queued_requests")},
                     {"run_dir", text_field(o, "run_dir")}});
  }
  const auto opt = [&](const char* key) {
    const auto v = number(fm, key);
    return v ? json(*v) : json(nullptr);
  };
  // find_max.json schema 1 named the answer max_concurrency_found and the range's ends
  // min/max_concurrency; schema 2 has the answer as max_concurrency, the range in
  // concurrency_range.
  const bool schema_1 = number(fm, "schema_version").value_or(1) < 2;
  const auto range_end = [&](const char* end, const char* schema_1_key) {
    if (schema_1) return opt(schema_1_key);
    const auto v = number(field(fm, "concurrency_range"), end);
    return v ? json(*v) : json(nullptr);
  };
  const bool simulated = flag(fm, "simulated");
  json natures = json::array();
  natures.push_back(
      {{"what", "memory, latency"}, {"nature", simulated ? "simulated" : "measured"}});
  natures.push_back({{"what", "KV cache usage"}, {"nature", "engine-reported"}});
  return {{"type", "find_max"},
          {"run_id", text_field(fm, "run_id")},
          {"dir", dir.string()},
          {"endpoint", text_field(fm, "endpoint")},
          {"launch", text_field(fm, "launch")},
          {"simulated", simulated},
          {"natures", natures},
          {"input_len", opt("input_len")},
          {"output_len", opt("output_len")},
          {"slo_ttft_ms", opt("slo_ttft_ms")},
          {"slo_itl_ms", opt("slo_itl_ms")},
          {"max_memory_frac", opt("max_memory_frac")},
          {"min_concurrency", range_end("min", "min_concurrency")},
          {"max_concurrency", range_end("max", "max_concurrency")},
          {"start", opt("start")},
          {"start_source", text_field(fm, "start_source")},
          {"answer", opt(schema_1 ? "max_concurrency_found" : "max_concurrency")},
          {"first_fail", opt("first_failing_concurrency")},
          {"at_range_limit", flag(fm, "at_range_limit")},
          {"interrupted", flag(fm, "interrupted")},
          {"margin", text_field(fm, "margin")},
          {"n_steps", opt("n_steps")},
          {"step_bound", opt("step_bound")},
          {"grid_steps", opt("grid_steps")},
          {"wall_s", opt("wall_s")},
          {"steps", steps}};
}

json compare_deltas(const json& comparison) {
  json ids = json::array(), simulated = json::array();
  for (const auto& r : array(comparison, "runs")) {
    ids.push_back(text_field(r, "run_id"));
    simulated.push_back(flag(r, "simulated"));
  }
  // Memory rows in bytes with at least one difference, in one unit.
  double max_bytes = 0;
  std::vector<const json*> rows;
  for (const auto& row : array(comparison, "memory")) {
    if (text_field(row, "unit") != "bytes") continue;
    bool any = false;
    for (const auto& d : array(row, "diff_vs_first"))
      any = any || d.is_number();
    if (!any) continue;
    rows.push_back(&row);
    for (const auto& v : array(row, "values"))
      if (v.is_number()) max_bytes = std::max(max_bytes, std::abs(v.get<double>()));
  }
  const MemoryUnit unit = memory_unit(max_bytes);
  const auto in_unit = [&](const json& v) {
    return v.is_number() ? scaled(v.get<double>(), unit.bytes) : json(nullptr);
  };
  json memory = json::array();
  for (const json* row : rows) {
    json values = json::array(), diff = json::array(), pct = json::array();
    for (const auto& v : array(*row, "values"))
      values.push_back(in_unit(v));
    for (const auto& v : array(*row, "diff_vs_first"))
      diff.push_back(in_unit(v));
    for (const auto& v : array(*row, "pct_change_vs_first"))
      pct.push_back(v.is_number() ? json(std::round(v.get<double>() * 10) / 10) : json(nullptr));
    memory.push_back({{"section", text_field(*row, "section")},
                      {"name", text_field(*row, "name")},
                      {"values", values},
                      {"diff", diff},
                      {"pct", pct}});
  }
  json graphs = json::array();
  for (const auto& g : array(comparison, "cuda_graphs")) {
    const auto opt = [&](const char* key) {
      const auto v = number(g, key);
      return v ? json(*v) : json(nullptr);
    };
    graphs.push_back({{"run_id", text_field(g, "run_id")},
                      {"graphs_first", opt("graphs_first")},
                      {"graphs", opt("graphs")},
                      {"extra_graphs", opt("extra_graphs")},
                      {"memory_figure", text_field(g, "memory_figure")},
                      {"overhead_bytes", opt("memory_overhead_bytes")},
                      {"increase_pct", opt("memory_increase_pct")},
                      {"per_graph_bytes", opt("memory_per_extra_graph_bytes")},
                      {"estimated_extra_graphs", opt("estimated_extra_graphs")},
                      {"estimated_overhead_bytes", opt("estimated_overhead_bytes")}});
  }
  return {{"run_ids", ids},
          {"simulated", simulated},
          {"unit", unit.name},
          {"memory", memory},
          {"settings", array(comparison, "settings_that_differ")},
          {"graphs", graphs},
          {"notes", array(comparison, "notes")}};
}

std::optional<std::string> experiment_kind(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_regular_file(dir / "sweep.json", ec)) return "sweep";
  if (fs::is_regular_file(dir / "find_max.json", ec)) return "find-max";
  return std::nullopt;
}

std::vector<fs::path> experiment_run_dirs(const std::string& kind, const json& doc,
                                          const fs::path& dir) {
  std::vector<fs::path> dirs;
  const auto add = [&](const std::string& p) {
    if (p.empty()) return;
    fs::path path(p);
    std::error_code ec;  // a path the file system refuses (too long, bad bytes) is absent
    if (path.is_relative() && !fs::exists(path, ec)) path = dir / path;
    if (fs::is_regular_file(path / "summary.json", ec) &&
        std::ranges::find(dirs, path) == dirs.end()) {
      dirs.push_back(path);
    }
  };
  if (kind == "sweep") {
    for (const auto& c : array(doc, "configurations"))
      add(text_field(field(c, "run"), "run_dir"));
  } else {
    for (const auto& s : array(doc, "steps"))
      add(text_field(field(s, "outcome"), "run_dir"));
  }
  return dirs;
}

Expected<json> read_experiment_file(const fs::path& dir, const std::string& kind) {
  return results::read_json_file(dir / (kind == "sweep" ? "sweep.json" : "find_max.json"));
}

}  // namespace kvprof::report::html
