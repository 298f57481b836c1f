// Runs and plans compared side by side (see compare.hpp).
#include "kvprof/experiment/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "kvprof/report/text/table.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::experiment {

using nlohmann::json;

namespace {

std::optional<double> opt_d(const std::optional<uint64_t>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

std::optional<double> find_d(const std::map<std::string, double>& m, const std::string& key) {
  const auto it = m.find(key);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

// Fills diff and pct of `row` against its first value.
DiffRow finish(DiffRow row) {
  const auto& v = row.values;
  for (size_t i = 1; i < v.size(); ++i) {
    std::optional<double> d, p;
    if (v[0] && v[i]) {
      d = *v[i] - *v[0];
      if (*v[0] != 0) p = *d / std::fabs(*v[0]) * 100.0;
    }
    row.diff.push_back(d);
    row.pct.push_back(p);
  }
  return row;
}

template <class Get>
DiffRow make_row(const std::vector<results::RunSummary>& runs, std::string section,
                 std::string name, std::string unit, Get get) {
  DiffRow row{std::move(section), std::move(name), std::move(unit), {}, {}, {}};
  for (const auto& r : runs)
    row.values.push_back(get(r));
  return finish(std::move(row));
}

bool any_value(const DiffRow& row) {
  return std::any_of(row.values.begin(), row.values.end(), [](const auto& v) { return v; });
}

const results::GpuMemory* find_gpu(const results::RunSummary& r, unsigned gpu) {
  for (const auto& g : r.gpus)
    if (g.gpu == gpu) return &g;
  return nullptr;
}

// Reported components in the order engines report them; others after, by name.
std::vector<std::string> reported_names(const std::vector<results::RunSummary>& runs) {
  std::vector<std::string> order = {"weights",    "kv_cache",     "activation_peak", "non_torch",
                                    "cuda_graph", "non_kv_total", "compute",         "output"};
  std::set<std::string> seen;
  for (const auto& r : runs)
    for (const auto& [name, bytes] : r.reported)
      seen.insert(name);
  std::vector<std::string> out;
  for (const auto& n : order)
    if (seen.erase(n) > 0) out.push_back(n);
  out.insert(out.end(), seen.begin(), seen.end());
  return out;
}

void memory_rows(const std::vector<results::RunSummary>& runs,
                 const std::vector<PlanFigures>& plans, std::vector<DiffRow>& rows) {
  const std::string mem = runs[0].memory == "GPU" ? "GPU memory (all GPUs)" : runs[0].memory;
  const auto add = [&](DiffRow row) {
    if (any_value(row)) rows.push_back(std::move(row));
  };
  // Only figures of the same memory as the first run's: a GPU's used bytes and a process's RSS
  // are not one quantity, so their difference is not shown.
  const auto same_memory = [&](std::optional<uint64_t> results::RunSummary::*figure) {
    return [&runs, figure](const results::RunSummary& r) {
      return r.memory == runs[0].memory ? opt_d(r.*figure) : std::nullopt;
    };
  };
  add(make_row(runs, mem, "after startup (baseline)", "bytes",
               same_memory(&results::RunSummary::baseline_bytes)));
  add(make_row(runs, mem, "post-warmup", "bytes",
               same_memory(&results::RunSummary::post_warmup_bytes)));
  add(make_row(runs, mem, "peak", "bytes", same_memory(&results::RunSummary::peak_bytes)));
  std::set<unsigned> gpus;
  for (const auto& r : runs)
    for (const auto& g : r.gpus)
      gpus.insert(g.gpu);
  if (gpus.size() > 1) {
    for (unsigned gpu : gpus) {
      const std::string section = fmt::format("GPU {}", gpu);
      add(make_row(runs, section, "after startup (baseline)", "bytes",
                   [&](const results::RunSummary& r) {
                     const auto* g = find_gpu(r, gpu);
                     return g ? opt_d(g->baseline_bytes) : std::nullopt;
                   }));
      add(make_row(runs, section, "peak", "bytes", [&](const results::RunSummary& r) {
        const auto* g = find_gpu(r, gpu);
        return g ? opt_d(g->peak_bytes) : std::nullopt;
      }));
    }
  }
  // The nodes of a multi-node job, each GPU as the sampler on its node read it.
  std::set<std::pair<std::string, unsigned>> node_gpus;
  for (const auto& r : runs)
    for (const auto& n : r.nodes)
      for (const auto& g : n.gpus)
        node_gpus.emplace(n.node, g.gpu);
  for (const auto& [node, gpu] : node_gpus) {
    const auto reading = [&, node = node, gpu = gpu](auto member) {
      return [&, node, gpu, member](const results::RunSummary& r) -> std::optional<double> {
        for (const auto& n : r.nodes) {
          if (n.node != node) continue;
          for (const auto& g : n.gpus)
            if (g.gpu == gpu) return opt_d(g.*member);
        }
        return std::nullopt;
      };
    };
    const std::string section = fmt::format("node {} GPU {}", node, gpu);
    add(make_row(runs, section, "first reading", "bytes",
                 reading(&results::GpuMemory::baseline_bytes)));
    add(make_row(runs, section, "peak", "bytes", reading(&results::GpuMemory::peak_bytes)));
  }
  for (std::string_view c : results::k_components) {
    const std::string name(c);
    add(make_row(runs, "measured breakdown", name, "bytes", [&](const results::RunSummary& r) {
      const auto it = r.measured.find(name);
      return it == r.measured.end() ? std::nullopt : opt_d(it->second.bytes);
    }));
  }
  for (const auto& name : reported_names(runs)) {
    add(make_row(runs, "reported by engine", name, "bytes", [&](const results::RunSummary& r) {
      const auto it = r.reported.find(name);
      return it == r.reported.end() ? std::nullopt : std::optional<double>(it->second);
    }));
  }
  add(make_row(runs, "reported by engine", "CUDA graphs", "graphs",
               [](const results::RunSummary& r) { return opt_d(r.cuda_graphs); }));
  add(make_row(runs, "reported by engine", "KV blocks", "blocks",
               [](const results::RunSummary& r) { return opt_d(r.num_gpu_blocks); }));
  add(make_row(runs, "reported by engine", "KV cache tokens", "tokens",
               [](const results::RunSummary& r) { return opt_d(r.kv_cache_tokens); }));
  std::vector<std::string> est_names(std::begin(results::k_components),
                                     std::end(results::k_components));
  est_names.emplace_back("cuda_graph");
  for (const auto& name : est_names) {
    DiffRow row{"estimate", name, "bytes", {}, {}, {}};
    for (size_t i = 0; i < runs.size(); ++i) {
      row.values.push_back(plans.empty() ? find_d(runs[i].estimated, name)
                                         : find_d(plans[i].components, name));
    }
    add(finish(std::move(row)));
  }
  if (!plans.empty()) {
    DiffRow row{"estimate", "CUDA graphs", "graphs", {}, {}, {}};
    for (const auto& p : plans)
      row.values.push_back(opt_d(p.cuda_graphs));
    add(finish(std::move(row)));
  }
  add(make_row(runs, "host", "peak RSS of the server", "bytes", [](const results::RunSummary& r) {
    return r.kind == "profile" ? opt_d(r.host_peak_rss_bytes) : std::nullopt;
  }));
}

const results::ConditionSummary* find_condition(const results::RunSummary& r,
                                                const std::string& id) {
  for (const auto& c : r.conditions)
    if (c.id == id) return &c;
  return nullptr;
}

void latency_rows(const std::vector<results::RunSummary>& runs, std::vector<DiffRow>& rows) {
  using Field = double results::ConditionSummary::*;
  const std::pair<const char*, Field> metrics[] = {
      {"TTFT p50", &results::ConditionSummary::ttft_p50_ms},
      {"TTFT p99", &results::ConditionSummary::ttft_p99_ms},
      {"ITL p50", &results::ConditionSummary::itl_p50_ms},
      {"ITL p99", &results::ConditionSummary::itl_p99_ms},
      {"E2E p50", &results::ConditionSummary::e2e_p50_ms},
      {"E2E p99", &results::ConditionSummary::e2e_p99_ms},
      {"output tok/s", &results::ConditionSummary::output_tokens_per_s}};
  for (const auto& c : runs[0].conditions) {
    for (const auto& [name, field] : metrics) {
      DiffRow row =
          make_row(runs, c.id, name, name[0] == 'o' ? "tokens/s" : "ms",
                   [&, field = field](const results::RunSummary& r) -> std::optional<double> {
                     const auto* rc = find_condition(r, c.id);
                     if (rc == nullptr) return std::nullopt;
                     return rc->*field;
                   });
      if (any_value(row)) rows.push_back(std::move(row));
    }
    rows.push_back(make_row(runs, c.id, "errors", "requests",
                            [&](const results::RunSummary& r) -> std::optional<double> {
                              const auto* rc = find_condition(r, c.id);
                              if (rc == nullptr) return std::nullopt;
                              return static_cast<double>(rc->n_errors);
                            }));
  }
  rows.push_back(
      make_row(runs, "all conditions", "output tok/s", "tokens/s",
               [](const results::RunSummary& r) { return std::optional<double>(r.tokens_per_s); }));
  rows.push_back(make_row(runs, "all conditions", "requests ok", "requests",
                          [](const results::RunSummary& r) { return opt_d(r.n_ok); }));
}

std::optional<int64_t> delta(const std::optional<uint64_t>& a, const std::optional<uint64_t>& b) {
  if (!a || !b) return std::nullopt;
  return static_cast<int64_t>(*b) - static_cast<int64_t>(*a);
}

void graph_deltas(Comparison& c, const std::vector<PlanFigures>& plans) {
  const auto& runs = c.runs;
  const bool known = std::any_of(runs.begin(), runs.end(), [](const results::RunSummary& r) {
    return r.cuda_graphs.has_value();
  });
  if (!known) return;
  const auto reported_graph = [](const results::RunSummary& r) -> std::optional<uint64_t> {
    const auto it = r.reported.find("cuda_graph");
    if (it != r.reported.end()) return it->second;
    if (r.cuda_graphs == 0U) return uint64_t{0};  // eager: no graph memory
    return std::nullopt;
  };
  const results::RunSummary& base = runs[0];
  for (size_t i = 1; i < runs.size(); ++i) {
    const results::RunSummary& r = runs[i];
    GraphDelta g;
    g.run_id = r.id;
    g.graphs_base = base.cuda_graphs;
    g.graphs_other = r.cuda_graphs;
    g.extra_graphs = delta(base.cuda_graphs, r.cuda_graphs);
    // The loaded server before any request: what the graphs add to a started engine.
    std::optional<uint64_t> a = base.baseline_bytes, b = r.baseline_bytes;
    g.memory_figure = base.memory == "GPU" ? "GPU used after startup (baseline)"
                                           : base.memory + " after startup (baseline)";
    if (!a || !b) {
      a = base.peak_bytes;
      b = r.peak_bytes;
      g.memory_figure = base.memory + " at peak";
    }
    if (r.memory != base.memory) a = b = std::nullopt;  // not one quantity
    g.overhead_bytes = delta(a, b);
    if (g.overhead_bytes && a && *a > 0) {
      g.increase_pct = static_cast<double>(*g.overhead_bytes) / static_cast<double>(*a) * 100.0;
    }
    if (g.overhead_bytes && g.extra_graphs && *g.extra_graphs != 0) {
      g.bytes_per_graph =
          static_cast<double>(*g.overhead_bytes) / static_cast<double>(*g.extra_graphs);
    }
    g.reported_graph_bytes = delta(reported_graph(base), reported_graph(r));
    if (!plans.empty()) {
      g.estimated_extra_graphs = delta(plans[0].cuda_graphs, plans[i].cuda_graphs);
      const auto ta = find_d(plans[0].components, "total");
      const auto tb = find_d(plans[i].components, "total");
      if (ta && tb) g.estimated_overhead_bytes = static_cast<int64_t>(std::llround(*tb - *ta));
      if (g.estimated_overhead_bytes && g.estimated_extra_graphs &&
          *g.estimated_extra_graphs != 0) {
        g.estimated_bytes_per_graph = static_cast<double>(*g.estimated_overhead_bytes) /
                                      static_cast<double>(*g.estimated_extra_graphs);
      }
    }
    c.graphs.push_back(std::move(g));
  }
}

json rows_json(const std::vector<DiffRow>& rows) {
  json out = json::array();
  for (const auto& r : rows) {
    json values = json::array(), diff = json::array(), pct = json::array();
    for (const auto& v : r.values)
      values.push_back(opt_json(v));
    for (const auto& v : r.diff)
      diff.push_back(opt_json(v));
    for (const auto& v : r.pct)
      pct.push_back(opt_json(v));
    out.push_back({{"section", r.section},
                   {"name", r.name},
                   {"unit", r.unit},
                   {"values", values},
                   {"diff_vs_first", diff},
                   {"pct_change_vs_first", pct}});
  }
  return out;
}

// "1.25 GiB" / "512.0 MiB" for sizes; `sign` puts + before positive ones.
std::string size_text(double bytes, bool sign = false) {
  const char* plus = sign && bytes > 0 ? "+" : "";
  if (std::fabs(bytes) >= k_gib) return fmt::format("{}{:.2f} GiB", plus, bytes / k_gib);
  return fmt::format("{}{:.1f} MiB", plus, bytes / k_mib);
}

std::string value_text(const std::string& unit, const std::optional<double>& v, bool sign) {
  if (!v) return "-";
  if (unit == "bytes") return size_text(*v, sign);
  const char* plus = sign && *v > 0 ? "+" : "";
  if (unit == "ms" || unit == "tokens/s") return fmt::format("{}{:.1f}", plus, *v);
  return fmt::format("{}{:.0f}", plus, *v);
}

std::string pct_text(const std::optional<double>& p) {
  return p ? fmt::format("{:+.1f}%", *p) : "-";
}

std::string rows_text(const std::vector<DiffRow>& rows, size_t n_runs, bool with_unit) {
  std::vector<std::string> header{"section", "figure"};
  for (size_t i = 0; i < n_runs; ++i)
    header.push_back(std::string(1, static_cast<char>('A' + std::min<size_t>(i, 25))));
  for (size_t i = 1; i < n_runs; ++i) {
    const char letter = static_cast<char>('A' + std::min<size_t>(i, 25));
    header.push_back(fmt::format("{}-A", letter));
    header.push_back(fmt::format("{} %", letter));
  }
  report::text::Table t(header);
  std::string last_section;
  for (const auto& r : rows) {
    std::vector<std::string> cells{r.section == last_section ? "" : r.section,
                                   with_unit && r.unit != "bytes" && r.unit != "ms"
                                       ? fmt::format("{} ({})", r.name, r.unit)
                                       : r.name};
    last_section = r.section;
    for (const auto& v : r.values)
      cells.push_back(value_text(r.unit, v, false));
    for (size_t i = 0; i < r.diff.size(); ++i) {
      cells.push_back(value_text(r.unit, r.diff[i], true));
      cells.push_back(pct_text(r.pct[i]));
    }
    t.add_row(cells);
  }
  return t.render();
}

std::string graph_text(const GraphDelta& g, char letter) {
  std::string out = fmt::format("CUDA graphs, {} vs A: ", letter);
  const auto count = [](const std::optional<uint64_t>& n) {
    return n ? std::to_string(*n) : std::string("?");
  };
  out += fmt::format("{} vs {} graphs", count(g.graphs_other), count(g.graphs_base));
  if (g.extra_graphs) out += fmt::format(", {:+d} extra", *g.extra_graphs);
  out += "\n";
  if (g.overhead_bytes) {
    out += fmt::format("  memory overhead: {} ({}){}\n",
                       size_text(static_cast<double>(*g.overhead_bytes), true),
                       g.increase_pct ? fmt::format("{:+.1f}% increase", *g.increase_pct) : "-",
                       fmt::format(", {}", g.memory_figure));
  }
  if (g.bytes_per_graph) {
    out += fmt::format("  memory per extra graph: {}\n", size_text(*g.bytes_per_graph));
  }
  if (g.reported_graph_bytes) {
    out += fmt::format("  the engines' own CUDA graph figures differ by {}\n",
                       size_text(static_cast<double>(*g.reported_graph_bytes), true));
  }
  if (g.estimated_overhead_bytes || g.estimated_extra_graphs) {
    out += fmt::format(
        "  estimate: {} extra graphs, {} per GPU{}\n",
        g.estimated_extra_graphs ? fmt::format("{:+d}", *g.estimated_extra_graphs) : "?",
        g.estimated_overhead_bytes
            ? size_text(static_cast<double>(*g.estimated_overhead_bytes), true)
            : "?",
        g.estimated_bytes_per_graph
            ? fmt::format(", {} per graph", size_text(*g.estimated_bytes_per_graph))
            : "");
  }
  return out;
}

}  // namespace

PlanFigures plan_figures(const estimate::Estimate& est, std::string flags) {
  const auto& m = est.per_gpu;
  const auto d = [](uint64_t v) { return static_cast<double>(v); };
  PlanFigures p;
  p.flags = std::move(flags);
  p.components = {
      {"weights", d(m.weights_bytes + m.draft_bytes)},
      {"kv_cache", d(m.kv_cache_bytes)},
      {"activations", d(m.activation_bytes)},
      {"overhead", static_cast<double>(m.overhead_bytes())},
      {"total", d(m.total_bytes)},
      {"cuda_graph", d(m.cuda_graph_bytes)},
  };
  if (engines::engine_row(est.settings.engine).plan_counts_cuda_graphs) {
    p.cuda_graphs = est.engine_report.cuda_graphs;
    p.cuda_graph_sets = est.engine_report.cuda_graph_sets;
  }
  return p;
}

Comparison compare_runs(std::vector<results::RunSummary> runs,
                        const std::vector<PlanFigures>& plans) {
  Comparison c;
  c.runs = std::move(runs);
  if (c.runs.size() < 2) return c;
  std::set<std::string> names;
  for (const auto& r : c.runs)
    for (const auto& [k, v] : r.settings)
      names.insert(k);
  for (const auto& name : names) {
    SettingDiff d{name, {}};
    for (const auto& r : c.runs) {
      const auto it = r.settings.find(name);
      d.values.push_back(it == r.settings.end() ? "-" : it->second);
    }
    if (std::adjacent_find(d.values.begin(), d.values.end(), std::not_equal_to<>()) !=
        d.values.end()) {
      c.settings.push_back(std::move(d));
    }
  }
  memory_rows(c.runs, plans, c.memory);
  latency_rows(c.runs, c.latency);
  graph_deltas(c, plans);
  std::set<std::string> kinds;
  for (const auto& r : c.runs)
    kinds.insert(r.kind);
  if (kinds.size() > 1) {
    c.notes.push_back(
        "the runs are of different kinds (profile: GPU memory of a server; bench: host memory "
        "of the in-process engine): their memory figures do not measure the same thing");
  }
  for (const auto& r : c.runs) {
    if (r.simulated) {
      c.notes.push_back("SIMULATED runs (kvprof serve-sim) are among these: no real GPU or model");
      break;
    }
  }
  return c;
}

json comparison_json(const Comparison& c) {
  json runs = json::array();
  for (const auto& r : c.runs) {
    runs.push_back({{"run_id", r.id},
                    {"run_dir", r.dir.string()},
                    {"kind", r.kind},
                    {"memory", r.memory},
                    {"model", r.model},
                    {"engine", r.engine},
                    {"engine_version", r.engine_version},
                    {"simulated", r.simulated},
                    {"launch_command", r.launch_command},
                    {"estimate_flags", r.estimate_flags}});
  }
  json settings = json::array();
  for (const auto& s : c.settings)
    settings.push_back({{"name", s.name}, {"values", s.values}});
  json graphs = json::array();
  for (const auto& g : c.graphs) {
    graphs.push_back({{"run_id", g.run_id},
                      {"graphs_first", opt_json(g.graphs_base)},
                      {"graphs", opt_json(g.graphs_other)},
                      {"extra_graphs", opt_json(g.extra_graphs)},
                      {"memory_figure", g.memory_figure},
                      {"memory_overhead_bytes", opt_json(g.overhead_bytes)},
                      {"memory_increase_pct", opt_json(g.increase_pct)},
                      {"memory_per_extra_graph_bytes", opt_json(g.bytes_per_graph)},
                      {"reported_graph_bytes_diff", opt_json(g.reported_graph_bytes)},
                      {"estimated_extra_graphs", opt_json(g.estimated_extra_graphs)},
                      {"estimated_overhead_bytes", opt_json(g.estimated_overhead_bytes)},
                      {"estimated_per_graph_bytes", opt_json(g.estimated_bytes_per_graph)}});
  }
  return {{"schema_version", 1},
          {"runs", runs},
          {"settings_that_differ", settings},
          {"memory", rows_json(c.memory)},
          {"latency", rows_json(c.latency)},
          {"cuda_graphs", graphs},
          {"notes", c.notes}};
}

std::string comparison_text(const Comparison& c) {
  std::string out;
  for (size_t i = 0; i < c.runs.size(); ++i) {
    const auto& r = c.runs[i];
    out += fmt::format("{}  {}  ({} run, {}{}{}{}) {}\n",
                       static_cast<char>('A' + std::min<size_t>(i, 25)), r.id, r.kind,
                       r.model.empty() ? "?" : r.model, r.engine.empty() ? "" : ", " + r.engine,
                       r.engine_version.empty() ? "" : " " + r.engine_version,
                       r.simulated ? ", SIMULATED" : "", r.dir.string());
  }
  out += "\nsettings that differ:\n";
  if (c.settings.empty()) {
    out += "  none recorded\n";
  } else {
    std::vector<std::string> header{"setting"};
    for (size_t i = 0; i < c.runs.size(); ++i)
      header.push_back(std::string(1, static_cast<char>('A' + std::min<size_t>(i, 25))));
    report::text::Table t(header);
    for (const auto& s : c.settings) {
      std::vector<std::string> cells{s.name};
      cells.insert(cells.end(), s.values.begin(), s.values.end());
      t.add_row(cells);
    }
    out += t.render();
  }
  out += "\nmemory:\n" + rows_text(c.memory, c.runs.size(), true);
  for (size_t i = 0; i < c.graphs.size(); ++i)
    out += "\n" + graph_text(c.graphs[i], static_cast<char>('B' + std::min<size_t>(i, 24)));
  out += "\nlatency and throughput:\n" + rows_text(c.latency, c.runs.size(), false);
  for (const auto& n : c.notes)
    out += "note: " + n + "\n";
  return out;
}

json plan_comparison_json(const PlanFigures& a, const PlanFigures& b) {
  json rows = json::array();
  for (const auto& [name, va] : a.components) {
    const auto vb = find_d(b.components, name);
    rows.push_back({{"component", name},
                    {"a_bytes", va},
                    {"b_bytes", opt_json(vb)},
                    {"diff_bytes", vb ? json(*vb - va) : json(nullptr)},
                    {"pct_change", vb && va != 0 ? json((*vb - va) / va * 100.0) : json(nullptr)}});
  }
  const auto extra = delta(a.cuda_graphs, b.cuda_graphs);
  const auto diff = [&](const char* component) {
    return find_d(b.components, component).value_or(0) -
           find_d(a.components, component).value_or(0);
  };
  const auto sets = [](const PlanFigures& p) {
    json out = json::object();
    for (const auto& [name, graphs] : p.cuda_graph_sets)
      out[name] = graphs;
    return out;
  };
  const double graph_diff = diff("cuda_graph");
  return {{"schema_version", 1},
          {"a",
           {{"flags", a.flags},
            {"cuda_graphs", opt_json(a.cuda_graphs)},
            {"cuda_graph_sets", sets(a)}}},
          {"b",
           {{"flags", b.flags},
            {"cuda_graphs", opt_json(b.cuda_graphs)},
            {"cuda_graph_sets", sets(b)}}},
          {"components", rows},
          {"extra_cuda_graphs", opt_json(extra)},
          {"memory_overhead_bytes", diff("total")},
          // Where the overhead came from: the graphs' own memory, and the KV cache an engine that
          // sizes its cache from what is left gave up for them.
          {"cuda_graph_diff_bytes", graph_diff},
          {"kv_cache_diff_bytes", diff("kv_cache")},
          {"memory_per_extra_graph_bytes",
           extra && *extra != 0 ? json(graph_diff / static_cast<double>(*extra)) : json(nullptr)}};
}

std::string plan_comparison_text(const PlanFigures& a, const PlanFigures& b) {
  const auto label = [](const std::string& flags) {
    return flags.find_first_not_of(' ') == std::string::npos ? std::string("(no extra flags)")
                                                             : flags;
  };
  std::string out = fmt::format("A: {}\nB: {}\n", label(a.flags), label(b.flags));
  report::text::Table t({"per GPU", "A", "B", "B-A", "%"});
  for (std::string_view n :
       {"weights", "kv_cache", "activations", "overhead", "cuda_graph", "total"}) {
    const std::string name(n);
    // CUDA graphs are part of overhead: shown under it, so the rows add up to the total.
    const std::string row = name == "cuda_graph" ? "  of which CUDA graphs" : name;
    const auto va = find_d(a.components, name);
    const auto vb = find_d(b.components, name);
    std::optional<double> d, p;
    if (va && vb) {
      d = *vb - *va;
      if (*va != 0) p = *d / *va * 100.0;
    }
    t.add_row({row, value_text("bytes", va, false), value_text("bytes", vb, false),
               value_text("bytes", d, true), pct_text(p)});
  }
  t.add_row({"CUDA graphs", value_text("graphs", opt_d(a.cuda_graphs), false),
             value_text("graphs", opt_d(b.cuda_graphs), false),
             value_text("graphs",
                        a.cuda_graphs && b.cuda_graphs
                            ? std::optional<double>(static_cast<double>(*b.cuda_graphs) -
                                                    static_cast<double>(*a.cuda_graphs))
                            : std::nullopt,
                        true),
             "-"});
  // The graphs of each set (draft length) the engine captures, as TensorRT-LLM warms them up.
  std::vector<std::string> set_names;
  for (const auto* p : {&a, &b}) {
    for (const auto& [name, graphs] : p->cuda_graph_sets) {
      if (std::find(set_names.begin(), set_names.end(), name) == set_names.end())
        set_names.push_back(name);
    }
  }
  for (const auto& name : set_names) {
    const auto graphs_of = [&](const PlanFigures& p) -> std::optional<double> {
      for (const auto& [n, g] : p.cuda_graph_sets) {
        if (n == name) return g;
      }
      return p.cuda_graph_sets.empty() ? std::nullopt : std::optional<double>(0);
    };
    const auto ga = graphs_of(a), gb = graphs_of(b);
    t.add_row(
        {"  " + name, value_text("graphs", ga, false), value_text("graphs", gb, false),
         value_text("graphs", ga && gb ? std::optional<double>(*gb - *ga) : std::nullopt, true),
         "-"});
  }
  out += t.render();
  const auto extra = delta(a.cuda_graphs, b.cuda_graphs);
  const auto ta = find_d(a.components, "total");
  const auto tb = find_d(b.components, "total");
  const auto diff = [&](const char* component) -> std::optional<double> {
    const auto va = find_d(a.components, component), vb = find_d(b.components, component);
    return va && vb ? std::optional<double>(*vb - *va) : std::nullopt;
  };
  const auto graphs = diff("cuda_graph");
  const auto kv = diff("kv_cache");
  if (ta && tb) {
    out += fmt::format("memory overhead of B: {} per GPU ({:+.1f}%)", size_text(*tb - *ta, true),
                       *ta != 0 ? (*tb - *ta) / *ta * 100.0 : 0.0);
    if (extra && *extra != 0 && graphs) {
      out += fmt::format(", {:+d} CUDA graphs, {} per extra graph", *extra,
                         size_text(*graphs / static_cast<double>(*extra)));
    }
    out += "\n";
  }
  // An engine that sizes its KV cache from what is left pays for new graphs with cache: the
  // total hides them.
  if (graphs && kv && *graphs > 0 && *kv < 0) {
    out += fmt::format(
        "where it came from: the CUDA graphs take {}; the KV cache shrank by {} to pay for them "
        "(the engine sizes its cache from the memory left)\n",
        size_text(*graphs, true), size_text(-*kv));
  }
  return out;
}

}  // namespace kvprof::experiment
