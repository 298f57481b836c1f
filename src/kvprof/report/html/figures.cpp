// Figure data from runs (see figures.hpp).
#include "kvprof/report/html/figures.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace kvprof::report::html {
namespace {

constexpr double k_gib_f = 1024.0 * 1024.0 * 1024.0;
constexpr double k_mib_f = 1024.0 * 1024.0;

// What the figures put on their x axis: the concurrency, or — for an experiment that holds the
// concurrency and varies the input length (a bench --seqlens sweep) — the input length, so each
// experiment is drawn against its own axis.
struct XAxis {
  bool input_length = false;
  std::map<uint32_t, size_t> index;  // value -> category

  [[nodiscard]] uint32_t value(const ConditionPoint& p) const {
    return input_length ? p.input_len.value_or(0) : p.concurrency;
  }
  [[nodiscard]] double x(const ConditionPoint& p) const {
    return static_cast<double>(index.at(value(p)));
  }
  // The series a point belongs to: along input lengths, one per concurrency.
  [[nodiscard]] std::string group(const ConditionPoint& p) const {
    return input_length ? fmt::format("c{}", p.concurrency) : p.group;
  }
  [[nodiscard]] std::string title_suffix() const {
    return input_length ? " vs input length" : " vs concurrency";
  }
};

// The axis of `runs`, its values as the categories of `f` and its label.
XAxis x_axis(std::span<const RunData> runs, Figure& f) {
  XAxis axis;
  std::set<uint32_t> concurrencies, inputs;
  bool all_inputs = true;
  for (const auto& r : runs) {
    for (const auto& p : r.points) {
      concurrencies.insert(p.concurrency);
      if (p.input_len) {
        inputs.insert(*p.input_len);
      } else {
        all_inputs = false;
      }
    }
  }
  axis.input_length = all_inputs && concurrencies.size() == 1 && inputs.size() > 1;
  const auto& values = axis.input_length ? inputs : concurrencies;
  for (uint32_t v : values) {
    axis.index[v] = f.categories.size();
    f.categories.push_back(std::to_string(v));
  }
  f.x_label = axis.input_length ? "input length (prompt tokens)" : "concurrent requests";
  // The file stem says the axis too: fig1_mem_vs_input_len.png.
  if (constexpr std::string_view k_suffix = "_vs_concurrency";
      axis.input_length && f.id.ends_with(k_suffix)) {
    f.id = f.id.substr(0, f.id.size() - k_suffix.size()) + "_vs_input_len";
  }
  return axis;
}

// Groups of a run in first-seen order, each with its points sorted along the axis.
std::vector<std::pair<std::string, std::vector<const ConditionPoint*>>> groups_of(
    const RunData& run, const XAxis& axis) {
  std::vector<std::pair<std::string, std::vector<const ConditionPoint*>>> out;
  for (const auto& p : run.points) {
    const std::string group = axis.group(p);
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& g) { return g.first == group; });
    if (it == out.end()) {
      out.emplace_back(group, std::vector<const ConditionPoint*>{});
      it = out.end() - 1;
    }
    it->second.push_back(&p);
  }
  for (auto& g : out) {
    std::stable_sort(g.second.begin(), g.second.end(),
                     [&](const auto* a, const auto* b) { return axis.value(*a) < axis.value(*b); });
  }
  return out;
}

std::string series_name(std::span<const RunData> runs, const RunData& run, const std::string& group,
                        const std::string& what) {
  std::string name = group;
  if (runs.size() > 1) name = run.run_id + " " + group;
  return what.empty() ? name : name + " " + what;
}

std::string runs_subtitle(std::span<const RunData> runs) {
  if (runs.size() == 1) return run_caption(runs.front());
  std::string s;
  for (const auto& r : runs)
    s += (s.empty() ? "" : " | ") + r.run_id + ": " + r.model + ", " + r.engine;
  return s;
}

}  // namespace

std::string Figure::natures() const {
  std::vector<std::string> parts;
  for (const auto& s : series) {
    const std::string n = nature_name(s.nature);
    if (std::find(parts.begin(), parts.end(), n) == parts.end()) parts.push_back(n);
  }
  for (const auto& s : hlines) {
    const std::string n = nature_name(s.nature);
    if (std::find(parts.begin(), parts.end(), n) == parts.end()) parts.push_back(n);
  }
  return "data: " + fmt::format("{}", fmt::join(parts, ", "));
}

MemoryUnit memory_unit(double max_bytes) {
  return max_bytes >= k_gib_f ? MemoryUnit{"GiB", k_gib_f} : MemoryUnit{"MiB", k_mib_f};
}

std::string run_caption(const RunData& run) {
  std::string s = run.model + " | " + run.engine;
  if (!run.engine_version.empty()) s += " " + run.engine_version;
  s += " | " + run.device;
  if (!run.kvprof_version.empty()) s += " | kvprof " + run.kvprof_version;
  if (run.simulated) s += " | SIMULATED";
  return s;
}

std::vector<std::string> run_caption_lines(const RunData& run) {
  std::string engine = run.engine;
  if (!run.engine_version.empty()) engine += " " + run.engine_version;
  std::string device = run.device;
  if (!run.kvprof_version.empty()) device += " | kvprof " + run.kvprof_version;
  if (run.simulated) device += " | SIMULATED";
  return {"model: " + run.model, "engine: " + engine, "device: " + device};
}

Figure memory_vs_concurrency(std::span<const RunData> runs) {
  Figure f;
  f.id = "fig1_mem_vs_concurrency";
  bool host = false;
  double max_bytes = 0;
  for (const auto& r : runs) {
    host = host || r.memory_kind == "host";
    for (const auto& p : r.points) {
      max_bytes = std::max({max_bytes, p.peak_bytes.value_or(0), p.estimate_bytes.value_or(0)});
    }
  }
  const MemoryUnit unit = memory_unit(max_bytes);
  bool gpu = false;
  for (const auto& r : runs)
    gpu = gpu || r.memory_kind == "GPU";
  const char* what = host && gpu ? "" : host ? "host " : "GPU ";
  const auto axis = x_axis(runs, f);
  f.title =
      fmt::format("Peak {}memory{}{}", what, host && !gpu ? " (RSS)" : "", axis.title_suffix());
  f.subtitle = runs_subtitle(runs);
  f.y_label = fmt::format("peak {}memory ({})", what, unit.name);
  f.y_unit = unit.name;
  int color = 0;
  for (const auto& r : runs) {
    for (const auto& [group, points] : groups_of(r, axis)) {
      FigureSeries measured{
          series_name(runs, r, group, "measured"), r.memory_nature, color, false, true, {}, {}};
      FigureSeries estimate{
          series_name(runs, r, group, "estimate"), Nature::estimated, color, true, false, {}, {}};
      for (const auto* p : points) {
        const double x = axis.x(*p);
        if (p->peak_bytes) {
          measured.x.push_back(x);
          measured.y.push_back(*p->peak_bytes / unit.bytes);
        }
        if (p->estimate_bytes) {
          estimate.x.push_back(x);
          estimate.y.push_back(*p->estimate_bytes / unit.bytes);
        }
      }
      if (!measured.x.empty()) f.series.push_back(std::move(measured));
      if (!estimate.x.empty()) f.series.push_back(std::move(estimate));
      ++color;
    }
    if (r.capacity_bytes && !host) {
      FigureSeries cap{runs.size() > 1 ? r.run_id + " GPU capacity" : "GPU capacity",
                       r.memory_nature,
                       -1,
                       true,
                       false,
                       {},
                       {*r.capacity_bytes / unit.bytes}};
      f.hlines.push_back(std::move(cap));
    }
  }
  return f;
}

Figure throughput_vs_concurrency(std::span<const RunData> runs) {
  Figure f;
  f.id = "fig2_tps_vs_concurrency";
  const auto axis = x_axis(runs, f);
  f.title = "Output throughput" + axis.title_suffix();
  f.subtitle = runs_subtitle(runs);
  f.y_label = "output tokens/s (all requests)";
  f.y_unit = "tokens/s";
  int color = 0;
  for (const auto& r : runs) {
    const Nature nature = r.simulated ? Nature::simulated : Nature::measured;
    for (const auto& [group, points] : groups_of(r, axis)) {
      FigureSeries measured{
          series_name(runs, r, group, "measured"), nature, color, false, true, {}, {}};
      FigureSeries linear{series_name(runs, r, group, "linear scaling"),
                          Nature::reference,
                          color,
                          true,
                          false,
                          {},
                          {}};
      const ConditionPoint* first = nullptr;
      for (const auto* p : points) {
        if (!p->tokens_per_s) continue;
        const double x = axis.x(*p);
        measured.x.push_back(x);
        measured.y.push_back(*p->tokens_per_s);
        if (first == nullptr && p->concurrency > 0 && !axis.input_length) first = p;
        if (first != nullptr) {
          linear.x.push_back(x);
          linear.y.push_back(*first->tokens_per_s * p->concurrency / first->concurrency);
        }
      }
      if (!measured.x.empty()) f.series.push_back(std::move(measured));
      if (linear.x.size() > 1) f.series.push_back(std::move(linear));
      ++color;
    }
  }
  return f;
}

Figure latency_vs_concurrency(std::span<const RunData> runs, const std::string& which) {
  Figure f;
  f.id = "latency_" + which + "_vs_concurrency";
  const std::string name = which == "ttft"  ? "Time to first token"
                           : which == "itl" ? "Inter-token latency"
                                            : "End-to-end latency";
  const std::string short_name = which == "ttft" ? "TTFT" : which == "itl" ? "ITL" : "E2E";
  const auto axis = x_axis(runs, f);
  f.title = name + " (" + short_name + ")" + axis.title_suffix();
  f.subtitle = runs_subtitle(runs);
  f.y_label = short_name + " (ms)";
  f.y_unit = "ms";
  int color = 0;
  for (const auto& r : runs) {
    const Nature nature = r.simulated ? Nature::simulated : Nature::measured;
    for (const auto& [group, points] : groups_of(r, axis)) {
      FigureSeries p50{series_name(runs, r, group, "p50"), nature, color, false, true, {}, {}};
      FigureSeries p99{series_name(runs, r, group, "p99"), nature, color, true, true, {}, {}};
      for (const auto* p : points) {
        const LatencyPercentiles& l = which == "ttft"  ? p->ttft_ms
                                      : which == "itl" ? p->itl_ms
                                                       : p->e2e_ms;
        if (l.n == 0) continue;
        const double x = axis.x(*p);
        p50.x.push_back(x);
        p50.y.push_back(l.p50);
        p99.x.push_back(x);
        p99.y.push_back(l.p99);
      }
      if (!p50.x.empty()) {
        f.series.push_back(std::move(p50));
        f.series.push_back(std::move(p99));
      }
      ++color;
    }
  }
  return f;
}

nlohmann::json figure_json(const Figure& f) {
  const auto series_json = [](const FigureSeries& s) {
    nlohmann::json points = nlohmann::json::array();
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      points.push_back({s.x[i], s.y[i]});
    return nlohmann::json{{"name", s.name},     {"nature", nature_name(s.nature)},
                          {"color", s.color},   {"dashed", s.dashed},
                          {"marker", s.marker}, {"points", points}};
  };
  nlohmann::json series = nlohmann::json::array(), hlines = nlohmann::json::array();
  for (const auto& s : f.series)
    series.push_back(series_json(s));
  for (const auto& s : f.hlines)
    hlines.push_back({{"name", s.name}, {"nature", nature_name(s.nature)}, {"y", s.y.front()}});
  return {{"id", f.id},
          {"title", f.title},
          {"subtitle", f.subtitle},
          {"natures", f.natures()},
          {"x_label", f.x_label},
          {"y_label", f.y_label},
          {"y_unit", f.y_unit},
          {"categories", f.categories},
          {"series", series},
          {"hlines", hlines}};
}

}  // namespace kvprof::report::html
