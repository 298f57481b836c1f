// The report's data, page and files (see report.hpp).
#include "kvprof/report/html/page.hpp"

#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <fstream>

#include "kvprof/report/html/downsample.hpp"
#include "kvprof/report/html/experiment_sections.hpp"
#include "kvprof/report/html/figures.hpp"
#include "kvprof/report/html/image.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/time_text.hpp"

namespace kvprof::embedded {
std::string_view chart_js();
std::string_view report_js();
std::string_view report_experiments_js();
std::string_view report_css();
}  // namespace kvprof::embedded

namespace kvprof::report::html {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

double round_to(double v, double step) {
  return std::round(v / step) * step;
}

// [[t, v], ...] of a series thinned to n_buckets, values divided by `scale`.
json series_points(const TimeSeries& s, size_t n_buckets, double scale, double step) {
  const auto keep = downsample_keep_peaks(s.t_s, s.value, n_buckets);
  json points = json::array();
  for (size_t i : keep)
    points.push_back({round_to(s.t_s[i], 1e-3), round_to(s.value[i] / scale, step)});
  return points;
}

json series_json(const TimeSeries& s, size_t n_buckets, double scale, double step) {
  return {{"name", s.name},
          {"nature", nature_name(s.nature)},
          {"n_samples", s.t_s.size()},
          {"points", series_points(s, n_buckets, scale, step)}};
}

json timeline_json(const RunData& run, size_t n_buckets) {
  double max_bytes = run.capacity_bytes.value_or(0);
  for (const auto& m : run.memory)
    for (double v : m.value)
      max_bytes = std::max(max_bytes, v);
  const MemoryUnit unit = memory_unit(max_bytes);
  const double step = 1e-4;
  json memory = json::array();
  for (const auto& m : run.memory)
    memory.push_back(series_json(m, n_buckets, unit.bytes, step));
  json t = {{"unit", unit.name},
            {"memory_label", run.memory_kind == "GPU" ? "GPU memory used" : "host memory (RSS)"},
            {"memory", memory},
            {"duration_s", run.duration_s}};
  if (run.host_rss) t["host"] = series_json(*run.host_rss, n_buckets, unit.bytes, step);
  if (run.kv_usage) t["kv"] = series_json(*run.kv_usage, n_buckets, 0.01, 1e-3);
  if (run.in_flight) t["in_flight"] = series_json(*run.in_flight, n_buckets * 2, 1, 1);
  if (run.capacity_bytes && run.memory_kind == "GPU") {
    t["capacity"] = round_to(*run.capacity_bytes / unit.bytes, step);
  }
  json captures = json::array(), phases = json::array(), windows = json::array();
  for (const auto& c : run.captures) {
    captures.push_back(
        {{"label", c.label},
         {"t", round_to(c.t_s, 1e-3)},
         {"v", c.bytes ? json(round_to(*c.bytes / unit.bytes, step)) : json(nullptr)}});
  }
  for (const auto& p : run.phases)
    phases.push_back({{"label", p.label}, {"begin", p.begin_s}, {"end", p.end_s}});
  for (const auto& w : run.windows)
    windows.push_back({{"label", w.label}, {"begin", w.begin_s}, {"end", w.end_s}});
  t["captures"] = captures;
  t["phases"] = phases;
  t["windows"] = windows;
  return t;
}

json breakdown_json(const RunData& run) {
  double max_bytes = 0, measured_sum = 0, estimated_sum = 0;
  for (const auto& c : run.components) {
    measured_sum += c.measured_bytes.value_or(0);
    estimated_sum += c.estimated_bytes.value_or(0);
  }
  max_bytes = std::max(measured_sum, estimated_sum);
  const MemoryUnit unit = memory_unit(max_bytes);
  json components = json::array();
  for (const auto& c : run.components) {
    components.push_back(
        {{"name", c.name},
         {"measured",
          c.measured_bytes ? json(round_to(*c.measured_bytes / unit.bytes, 1e-4)) : json(nullptr)},
         {"estimated", c.estimated_bytes ? json(round_to(*c.estimated_bytes / unit.bytes, 1e-4))
                                         : json(nullptr)},
         {"confidence", c.confidence},
         {"nature", nature_name(c.measured_nature)}});
  }
  return {{"unit", unit.name},
          {"memory", run.memory_kind},
          {"components", components},
          {"estimate_note", run.estimate_note},
          {"measured_label", run.breakdown_nature}};
}

json conditions_json(const RunData& run) {
  json rows = json::array();
  for (const auto& p : run.points) {
    const auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
    rows.push_back({{"label", p.label},
                    {"concurrency", p.concurrency},
                    {"peak_bytes", opt(p.peak_bytes)},
                    {"estimate_bytes", opt(p.estimate_bytes)},
                    {"kv_peak", opt(p.kv_peak_fraction)},
                    {"tokens_per_s", opt(p.tokens_per_s)},
                    {"ttft_p50_ms", p.ttft_ms.p50},
                    {"ttft_p99_ms", p.ttft_ms.p99},
                    {"itl_p50_ms", p.itl_ms.p50},
                    {"e2e_p50_ms", p.e2e_ms.p50},
                    {"e2e_p99_ms", p.e2e_ms.p99}});
  }
  return rows;
}

// What each kind of number in this run is.
json natures_json(const RunData& run) {
  json n = json::array();
  const std::string mem = run.memory_kind == "GPU" ? "GPU memory" : "host memory (RSS)";
  n.push_back({{"what", mem}, {"nature", nature_name(run.memory_nature)}});
  if (run.kv_usage) n.push_back({{"what", "KV cache usage"}, {"nature", "engine-reported"}});
  if (run.kind == "bench") n.push_back({{"what", "engine buffers"}, {"nature", "engine-reported"}});
  bool estimate = false;
  for (const auto& p : run.points)
    estimate = estimate || p.estimate_bytes.has_value();
  if (estimate) n.push_back({{"what", "estimate"}, {"nature", "estimated"}});
  n.push_back(
      {{"what", "latency, throughput"}, {"nature", run.simulated ? "simulated" : "measured"}});
  return n;
}

json run_section(const RunData& run, size_t n_buckets) {
  const std::span<const RunData> one(&run, 1);
  json figures = json::array();
  figures.push_back(figure_json(memory_vs_concurrency(one)));
  figures.push_back(figure_json(throughput_vs_concurrency(one)));
  for (const char* which : {"ttft", "itl", "e2e"})
    figures.push_back(figure_json(latency_vs_concurrency(one, which)));
  return {{"type", "run"},
          {"run_id", run.run_id},
          {"dir", run.dir.string()},
          {"kind", run.kind},
          {"header",
           {{"model", run.model},
            {"engine", run.engine},
            {"engine_version", run.engine_version},
            {"device", run.device},
            {"kvprof_version", run.kvprof_version},
            {"started_at", run.started_at},
            {"simulated", run.simulated},
            {"interrupted", run.interrupted},
            {"natures", natures_json(run)}}},
          {"caption", run_caption(run)},
          {"caption_lines", run_caption_lines(run)},
          {"timeline", timeline_json(run, n_buckets)},
          {"figures", figures},
          {"breakdown", breakdown_json(run)},
          {"conditions", conditions_json(run)},
          {"warnings", run.warnings}};
}

// Several runs side by side: figures 1 and 2 with a series per run and condition group.
json compare_section(std::span<const RunData> runs, const json& comparison) {
  json ids = json::array();
  for (const auto& r : runs)
    ids.push_back(r.run_id);
  json s = {
      {"type", "compare"},
      {"run_ids", ids},
      {"figures",
       {figure_json(memory_vs_concurrency(runs)), figure_json(throughput_vs_concurrency(runs))}}};
  if (!comparison.is_null()) s["deltas"] = compare_deltas(comparison);
  return s;
}

std::string html_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

Expected<void> write_text(const fs::path& path, std::string_view text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return fail(ErrorKind::io, fmt::format("cannot write '{}'", path.string()));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return fail(ErrorKind::io, fmt::format("cannot write '{}': {}", path.string(), ec.message()));
  return {};
}

}  // namespace

Expected<ReportOptions> parse_formats(const std::string& formats) {
  ReportOptions o;
  o.html = false;
  size_t i = 0;
  while (i <= formats.size()) {
    size_t j = formats.find(',', i);
    if (j == std::string::npos) j = formats.size();
    const std::string word = formats.substr(i, j - i);
    if (word == "html") {
      o.html = true;
    } else if (word == "png") {
      o.png = true;
    } else if (word == "svg") {
      o.svg = true;
    } else if (!word.empty()) {
      return fail(ErrorKind::usage,
                  fmt::format("unknown report format '{}' (html, png, svg)", word));
    }
    i = j + 1;
  }
  if (!o.html && !o.png && !o.svg) return fail(ErrorKind::usage, "no report format given");
  return o;
}

json report_data(std::span<const RunData> runs, size_t n_buckets, const ReportExtras& extras) {
  json sections = json::array();
  if (!extras.lead.is_null()) sections.push_back(extras.lead);
  if (runs.size() > 1 && extras.side_by_side)
    sections.push_back(compare_section(runs, extras.comparison));
  for (const auto& r : runs)
    sections.push_back(run_section(r, n_buckets));
  return {{"generator", std::string("kvprof ") + KVPROF_VERSION},
          {"generated_at", iso_utc(static_cast<double>(std::time(nullptr)))},
          {"sections", sections}};
}

std::string report_html(const json& data) {
  std::string title = "kvprof report";
  for (const auto& s : data["sections"]) {
    const std::string type = s.value("type", "");
    if (type == "sweep") title = "kvprof sweep " + s.value("name", "");
    if (type == "find_max") title = "kvprof find-max " + s.value("run_id", "");
    if (type == "run" && title.starts_with("kvprof report")) title += " " + s.value("run_id", "");
  }
  // Paths and names from outside may hold bytes that are not UTF-8: replaced, never thrown on.
  std::string payload = json_text(data);
  // The data sits in a <script> element: "</" must not end it early.
  for (size_t at = payload.find("</"); at != std::string::npos; at = payload.find("</", at + 3))
    payload.replace(at, 2, "<\\/");
  std::string html;
  html.reserve(payload.size() + embedded::chart_js().size() + 64 * 1024);
  html += "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  // Nothing may be fetched: scripts and styles are inline, images only data: URLs.
  html +=
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n";
  html +=
      "<meta name=\"generator\" content=\"" + html_escape(data.value("generator", "")) + "\">\n";
  html += "<title>" + html_escape(title) + "</title>\n<style>\n";
  html += embedded::report_css();
  html += "</style>\n</head>\n<body>\n<main id=\"report\"></main>\n";
  html += "<script id=\"kvprof-data\" type=\"application/json\">" + payload + "</script>\n";
  html += "<script>/* Chart.js (MIT licence), embedded */\n";
  html += embedded::chart_js();
  html += "\n</script>\n<script>\n";
  html += embedded::report_js();
  html += "\n</script>\n<script>\n";
  html += embedded::report_experiments_js();
  html += "\n</script>\n</body>\n</html>\n";
  return html;
}

Expected<std::vector<fs::path>> write_report(std::span<const RunData> runs, const fs::path& out_dir,
                                             const ReportOptions& options,
                                             const ReportExtras& extras) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) {
    return fail(ErrorKind::io,
                fmt::format("cannot create '{}': {}", out_dir.string(), ec.message()));
  }
  std::vector<fs::path> written;
  if (options.html) {
    const fs::path path = out_dir / "report.html";
    if (auto ok = write_text(path, report_html(report_data(runs, options.n_buckets, extras)));
        !ok) {
      return std::unexpected(ok.error());
    }
    written.push_back(path);
  }
  if ((options.png || options.svg) && !runs.empty()) {
    for (const Figure& f : {memory_vs_concurrency(runs), throughput_vs_concurrency(runs)}) {
      for (const auto& [on, format, ext] : {std::tuple{options.png, ImageFormat::png, ".png"},
                                            std::tuple{options.svg, ImageFormat::svg, ".svg"}}) {
        if (!on) continue;
        const fs::path path = out_dir / (f.id + ext);
        if (auto ok = write_figure(f, path, format); !ok) return std::unexpected(ok.error());
        written.push_back(path);
      }
    }
  }
  return written;
}

Expected<fs::path> write_run_report(const fs::path& run_dir) {
  auto run = load_run_data(run_dir);
  if (!run) return std::unexpected(run.error());
  ReportOptions options;
  options.png = true;
  auto written = write_report(std::span<const RunData>(&*run, 1), run_dir, options);
  if (!written) return std::unexpected(written.error());
  return run_dir / "report.html";
}

Expected<std::vector<fs::path>> write_experiment_report(const fs::path& dir,
                                                        const fs::path& out_dir,
                                                        const ReportOptions& options) {
  const auto kind = experiment_kind(dir);
  if (!kind) {
    return fail(ErrorKind::not_found,
                fmt::format("'{}' holds neither sweep.json nor find_max.json", dir.string()));
  }
  auto doc = read_experiment_file(dir, *kind);
  if (!doc) return std::unexpected(doc.error());
  std::vector<RunData> runs;
  std::vector<std::string> left_out;
  for (const auto& run_dir : experiment_run_dirs(*kind, *doc, dir)) {
    auto run = load_run_data(run_dir);
    if (run) {
      runs.push_back(std::move(*run));
    } else {
      left_out.push_back(run.error().message);
    }
  }
  ReportExtras extras;
  extras.lead = *kind == "sweep" ? sweep_section(*doc, dir) : find_max_section(*doc, dir);
  extras.lead["left_out"] = left_out;
  // What the runs ran on, for the section's header and its charts.
  if (!runs.empty()) {
    const RunData& first = runs.front();
    extras.lead["header"] = {{"model", first.model},
                             {"engine", first.engine},
                             {"engine_version", first.engine_version},
                             {"device", first.device},
                             {"kvprof_version", first.kvprof_version}};
  }
  extras.side_by_side = *kind == "sweep";
  ReportOptions o = options;
  o.n_buckets = std::min<size_t>(o.n_buckets, 500);  // many runs on one page
  return write_report(runs, out_dir, o, extras);
}

}  // namespace kvprof::report::html
