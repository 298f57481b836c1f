// summary.json and the terminal summary of a profile run (see report.hpp).
#include "kvprof/profile/summary.hpp"

#include <fmt/format.h>

#include <ctime>

#include "kvprof/profile/estimate_check.hpp"
#include "kvprof/report/text/table.hpp"
#include "kvprof/results/summary_layout.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/redact.hpp"
#include "kvprof/util/time_text.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::profile {

namespace {

using nlohmann::json;

double gib(uint64_t bytes) {
  return bytes_to_gib(bytes);
}

json window_json(const Window& w) {
  return {{"start_mono_ns", w.begin_ns}, {"end_mono_ns", w.end_ns}};
}

json gpu_stats_json(const GpuWindowStats& g, const std::vector<gpu::DeviceInfo>& gpus,
                    uint64_t used_bytes) {
  json j = {{"gpu", g.gpu},
            {"used_bytes", used_bytes},
            {"used_gib", gib(used_bytes)},
            {"min_used_bytes", g.min_used_bytes},
            {"max_used_bytes", g.max_used_bytes},
            {"mean_used_bytes", g.mean_used_bytes},
            {"n_samples", g.n_samples},
            {"total_bytes", opt_json(g.total_bytes)}};
  for (const auto& d : gpus) {
    if (d.index != g.gpu) continue;
    j["name"] = d.name ? json(*d.name) : json(nullptr);
    j["uuid"] = d.uuid ? json(*d.uuid) : json(nullptr);
  }
  return j;
}

json capture_json(const CapturePoint& cp, const std::vector<gpu::DeviceInfo>& gpus) {
  if (cp.empty()) return nullptr;
  json per_gpu = json::array();
  for (size_t i = 0; i < cp.per_gpu.size(); ++i) {
    per_gpu.push_back(gpu_stats_json(cp.per_gpu[i], gpus, cp.used_bytes[i]));
  }
  json j = results::capture_total_json(cp.sum_bytes);
  j.update(json{{"per_gpu_details", per_gpu},
                {"stats",
                 {{"sum_bytes", cp.sum_bytes},
                  {"max_bytes", cp.max_bytes},
                  {"mean_bytes", cp.mean_bytes},
                  {"stddev_bytes", cp.stddev_bytes}}},
                {"window", window_json(cp.window)}});
  return j;
}

results::PartFigures part_figures(const Component& c) {
  return {c.bytes, std::string(confidence_name(c.confidence)), c.method};
}

json breakdown_json(const MeasuredBreakdown& b) {
  return results::breakdown_json(
      {b.memory, b.memory == "gpu" ? std::optional<unsigned>(b.gpu) : std::nullopt,
       b.total_measured_bytes, part_figures(b.weights), part_figures(b.kv_cache),
       part_figures(b.activations), part_figures(b.overhead),
       std::string(confidence_name(b.overall))});
}

// The server's gauges over a window; the KV tokens at its KV peak from `kv` (derived.hpp).
json server_json(const MetricsWindowStats& s, const KvPeak& kv) {
  return {
      {"n_scrapes", s.n_scrapes},
      {"peak_kv_cache_usage", opt_json(s.peak_kv_cache_usage)},
      {"mean_kv_cache_usage", opt_json(s.mean_kv_cache_usage)},
      {"kv_cache_usage_source",
       s.kv_cache_source == metrics::KvSource::none
           ? json(nullptr)
           : json(s.kv_cache_source == metrics::KvSource::slots ? "/slots" : "/metrics")},
      {"peak_kv_cache_used_tokens", opt_json(kv.used_tokens)},
      {"peak_kv_cache_used_tokens_source",
       kv.source == KvTokensSource::none ? json(nullptr) : json(kv_tokens_source_name(kv.source))},
      {"peak_num_requests_running", opt_json(s.peak_num_requests_running)},
      {"peak_num_requests_waiting", opt_json(s.peak_num_requests_waiting)},
      {"preemptions", opt_json(s.preemptions)},
      {"num_gpu_blocks", opt_json(s.num_gpu_blocks)},
      {"block_size_tokens", opt_json(s.block_size_tokens)},
      {"kv_cache_capacity_tokens", opt_json(s.kv_cache_capacity_tokens)}};
}

json condition_json(const ConditionReport& c, const ConditionAnswer* derived) {
  json j = client::to_json(c.requests);
  std::optional<uint64_t> peak, mean, peak_gpu;
  for (const auto& g : c.memory) {
    peak = peak.value_or(0) + g.max_used_bytes;
    mean = mean.value_or(0) + g.mean_used_bytes;
    peak_gpu = std::max(peak_gpu.value_or(0), g.max_used_bytes);
  }
  j["window"] = window_json(c.window);
  j["peak_used_bytes"] = opt_json(peak);
  j["mean_used_bytes"] = opt_json(mean);
  j["peak_gpu_used_bytes"] = opt_json(peak_gpu);
  j["peak_rss_bytes"] = opt_json(c.peak_rss_bytes);
  j["server"] = server_json(c.server, derived ? derived->facts.kv_peak : KvPeak{});
  j["peak_kv_cache_usage"] = opt_json(c.server.peak_kv_cache_usage);
  j["preemptions"] = opt_json(c.server.preemptions);
  j.update(condition_metrics_json(c));
  if (derived) add_condition_fields(j, *derived);
  return j;
}

}  // namespace

RequestTotals request_totals(const ProfileReport& report) {
  RequestTotals t;
  for (const auto& c : report.conditions) {
    const auto& s = c.requests;
    t.n_requests += s.n_requests;
    t.n_ok += s.n_ok;
    t.n_errors += s.n_errors;
    t.n_cancelled += s.n_cancelled;
    t.n_repeated += std::min(s.n_repeated, s.n_requests);
    t.output_tokens += s.output_tokens;
    for (const auto& [kind, n] : s.errors_by_kind)
      t.errors_by_kind[kind] += n;
  }
  const uint64_t originals_sent = t.n_requests - t.n_repeated;  // repeats were not planned
  t.n_planned = std::max(report.n_planned_requests, originals_sent);
  t.n_not_sent = t.n_planned - originals_sent;
  return t;
}

std::string request_totals_text(const RequestTotals& t) {
  return fmt::format(
      "{} of {} requests sent completed{}, {} failed, {} cancelled; {} of the {} planned not sent",
      t.n_ok, t.n_requests,
      t.n_repeated > 0 ? fmt::format(" ({} sent again to fill --min-condition-s)", t.n_repeated)
                       : std::string(),
      t.n_errors, t.n_cancelled, t.n_not_sent, t.n_planned);
}

json summary_json(const ProfileReport& r) {
  const RequestTotals totals = request_totals(r);
  double e2e_sum_ms = 0, duration_s = 0;
  for (const auto& c : r.conditions) {
    e2e_sum_ms += c.requests.e2e_ms.mean * static_cast<double>(c.requests.e2e_ms.n);
    duration_s += c.requests.duration_s;
  }
  json gpus = json::array();
  for (const auto& d : r.gpus) {
    gpus.push_back({{"index", d.index},
                    {"name", d.name ? json(*d.name) : json(nullptr)},
                    {"uuid", d.uuid ? json(*d.uuid) : json(nullptr)}});
  }
  json conditions = json::array();
  for (size_t i = 0; i < r.conditions.size(); ++i) {
    conditions.push_back(condition_json(
        r.conditions[i], i < r.derived.conditions.size() ? &r.derived.conditions[i] : nullptr));
  }
  json comparison = nullptr;
  if (!r.comparison.empty()) {
    comparison = {{"estimate_flags", r.estimate_flags}, {"rows", json::array()}};
    for (const auto& row : r.comparison) {
      comparison["rows"].push_back(
          {{"component", row.name},
           {"unit", row.unit},
           {"measured", opt_json(row.measured)},
           {"estimated", opt_json(row.estimated)},
           {"error_pct", opt_json(row.error_pct)},
           {"measured_confidence", confidence_name(row.measured_confidence)},
           {"measured_source", row.measured_source}});
    }
  }
  json host = nullptr;
  if (r.host) {
    host = {{"pid", r.host->pid},
            {"process_group", r.host->process_group},
            {"peak_rss_bytes", opt_json(r.host->peak_rss_bytes)},
            {"peak_pss_bytes", opt_json(r.host->peak_pss_bytes)},
            {"samples", r.host->samples},
            {"exited", r.host->exited}};
    json phases = json::object();
    for (const auto& [name, point] : r.host_captures)
      phases[name] = {{"rss_bytes", point.rss_bytes}, {"t_mono_ns", point.t_mono_ns}};
    host["phases"] = std::move(phases);
  }
  const bool have_mem = !r.baseline.empty() && !r.peak.empty();
  json measurements = {{"baseline", capture_json(r.baseline, r.gpus)},
                       {"post_warmup", capture_json(r.post_warmup, r.gpus)},
                       {"peak", capture_json(r.peak, r.gpus)}};
  results::add_memory_increase(
      measurements, have_mem ? std::optional<uint64_t>(r.baseline.sum_bytes) : std::nullopt,
      have_mem ? std::optional<uint64_t>(r.peak.sum_bytes) : std::nullopt);
  json summary = {
      {"run_id", r.run_id},
      {"interrupted", r.interrupted},
      {"simulated", r.simulated},
      {"metadata",
       {{"started_at", iso_utc(r.started_unix_s)},
        {"ended_at", iso_utc(r.ended_unix_s)},
        {"started_unix_s", r.started_unix_s},
        {"duration_s", r.ended_unix_s - r.started_unix_s},
        {"endpoint", redact_secrets(r.endpoint)},
        {"run_dir", r.run_dir}}},
      {"model_info", {{"name", r.model}}},
      {"engine_metadata",
       {{"engine_type", r.engine_type},
        {"engine_version", r.server.version.empty() ? json(nullptr) : json(r.server.version)},
        {"simulated", r.server.simulated}}},
      {"memory_source", r.memory_source},
      {"gpus", gpus},
      {"memory_measurements", std::move(measurements)},
      {"memory_breakdown", r.breakdown ? breakdown_json(*r.breakdown) : json(nullptr)},
      {"engine_reported", r.engine_reported},
      {"launch", r.launch},
      {"estimate_comparison", comparison},
      {"server_metrics",
       [&] {
         json s = server_json(r.server_during_load, r.derived.load_kv_peak);
         s["n_scrapes_total"] = r.scraper.n_scrapes;
         s["n_scrapes_ok"] = r.scraper.n_ok;
         s["last_error"] = r.scraper.last_error;
         return s;
       }()},
      {"requests",
       {{"n_planned", totals.n_planned},
        {"n_requests", totals.n_requests},
        {"n_not_sent", totals.n_not_sent},
        {"n_ok", totals.n_ok},
        {"n_errors", totals.n_errors},
        {"n_cancelled", totals.n_cancelled},
        {"output_tokens", totals.output_tokens},
        {"errors_by_kind", totals.errors_by_kind},
        {"max_in_flight", r.max_in_flight},
        // Reads that delivered response bytes; tokens in one read share its arrival time.
        {"reads", r.transport.reads},
        {"kernel_timestamped_reads", r.transport.kernel_timestamped_reads}}},
      {"latency_stats",
       results::latency_totals_json(e2e_sum_ms, totals.n_ok, totals.output_tokens, duration_s)},
      {"conditions", conditions},
      {"condition_sampling", scrape_plan_json(r.scrape_plan)},
      {"derived", derived_json(r.derived)},
      {"host_memory", host},
      {"sampler",
       {{"device_rows", r.sampler.device_rows},
        {"process_rows", r.sampler.process_rows},
        {"host_rows", r.sampler.host_rows},
        {"missed_ticks", r.sampler.missed_ticks},
        {"failed_queries", r.sampler.failed_queries}}},
      {"gpu_gaps", r.gpu_gaps},
      {"warnings", r.warnings},
      {"files", r.files},
  };
  results::add_versions(summary, k_summary_schema_version);
  annotate_summary(r, summary);
  return summary;
}

namespace {

std::string gib_text(std::optional<uint64_t> bytes) {
  return bytes ? fmt::format("{:.2f}", gib(*bytes)) : "-";
}

// A component's GiB: overhead may be below zero.
std::string signed_gib_text(std::optional<int64_t> bytes) {
  return bytes
             ? fmt::format("{:.2f}", static_cast<double>(*bytes) / static_cast<double>(1ull << 30))
             : "-";
}

// A gauge's peak as a whole count, "-" when the server gave none.
std::string count_text(const std::optional<double>& v) {
  return v ? fmt::format("{:.0f}", *v) : "-";
}

// "p50/p99" of completed requests, "-" when none completed.
std::string latency_text(const client::Percentiles& p) {
  return p.n > 0 ? fmt::format("{:.0f}/{:.0f}", p.p50, p.p99) : "-";
}

std::string condition_table(const ProfileReport& r) {
  report::text::Table t({"condition", "ok/planned", "errors", "out tok/s", "TTFT p50/p99 ms",
                         "E2E p50/p99 ms", "peak GiB", "KV peak", "KV tokens", "KV tok/req",
                         "srv running", "srv waiting", "preempt"});
  for (size_t i = 0; i < r.conditions.size(); ++i) {
    const auto& c = r.conditions[i];
    const auto& s = c.requests;
    const ConditionAnswer* d = i < r.derived.conditions.size() ? &r.derived.conditions[i] : nullptr;
    std::string errors;
    for (const auto& [kind, n] : s.errors_by_kind)
      errors += fmt::format("{}{} {}", errors.empty() ? "" : ", ", n, kind);
    std::optional<uint64_t> peak;
    for (const auto& g : c.memory)
      peak = peak.value_or(0) + g.max_used_bytes;
    // A condition cut short: its cancelled and never-sent requests next to the errors.
    if (s.n_cancelled > 0)
      errors += fmt::format("{}{} cancelled", errors.empty() ? "" : ", ", s.n_cancelled);
    if (n_not_sent(s) > 0)
      errors += fmt::format("{}{} not sent", errors.empty() ? "" : ", ", n_not_sent(s));
    // KV tokens per request at the KV peak, measured/expected.
    std::string per_request = "-";
    if (d && d->measured_kv_tokens_per_request) {
      per_request = fmt::format("{:.0f}/{}", *d->measured_kv_tokens_per_request,
                                d->expected_kv_tokens_per_request);
    }
    t.add_row(
        {s.interrupted ? s.condition_id + " (INTERRUPTED)" : s.condition_id,
         fmt::format("{}/{}", s.n_ok, std::max(s.n_planned, s.n_requests)),
         errors.empty() ? "-" : errors, fmt::format("{:.1f}", s.output_tokens_per_s),
         latency_text(s.ttft_ms), latency_text(s.e2e_ms), peak_gib_cell(c, gib_text(peak)),
         kv_peak_cell(c), count_text(d ? d->facts.kv_peak.used_tokens : std::nullopt), per_request,
         sampled_cell(c, "num_requests_running", count_text(c.server.peak_num_requests_running)),
         sampled_cell(c, "num_requests_waiting", count_text(c.server.peak_num_requests_waiting)),
         count_text(c.server.preemptions)});
  }
  // The server's gauges and kvprof's "queued" are two things: a request the server counted as
  // waiting only for a step's token budget, then run with the others, did not queue.
  return t.render() +
         "srv running / srv waiting: the server's own gauges at their peak (a request waiting only "
         "for a step's token budget is not queued by kvprof's reckoning)\n";
}

// For an interrupted run, one line with the counts (empty otherwise).
std::string interrupted_text(const ProfileReport& r) {
  if (!r.interrupted) return "";
  const RequestTotals t = request_totals(r);
  return fmt::format("INTERRUPTED: {}; latency figures are over the completed ones\n",
                     request_totals_text(t));
}

std::string breakdown_table(const ProfileReport& r) {
  const auto& b = *r.breakdown;
  std::map<std::string, const ComparisonRow*> cmp;
  for (const auto& row : r.comparison)
    cmp[row.name] = &row;
  const bool with_est = !r.comparison.empty();
  std::vector<std::string> header{"component", r.simulated ? "simulated GiB" : "measured GiB",
                                  "confidence"};
  if (with_est) {
    header.emplace_back("estimated GiB");
    header.emplace_back(r.simulated ? "error (simulated)" : "error");
  }
  report::text::Table t(header);
  const auto add = [&](const std::string& label, const std::string& key,
                       std::optional<int64_t> bytes, Confidence conf) {
    std::vector<std::string> cells{label, signed_gib_text(bytes),
                                   r.simulated ? "simulated" : std::string(confidence_name(conf))};
    if (with_est) {
      const auto it = cmp.find(key);
      const ComparisonRow* row = it == cmp.end() ? nullptr : it->second;
      cells.push_back(row && row->estimated
                          ? fmt::format("{:.2f}", *row->estimated / static_cast<double>(1ull << 30))
                          : "-");
      cells.push_back(row && row->error_pct ? fmt::format("{:+.1f}%", *row->error_pct) : "-");
    }
    t.add_row(cells);
  };
  add("weights", "weights", b.weights.bytes, b.weights.confidence);
  add("KV cache", "kv_cache", b.kv_cache.bytes, b.kv_cache.confidence);
  add("activations", "activations", b.activations.bytes, b.activations.confidence);
  add("overhead", "overhead", b.overhead.bytes, b.overhead.confidence);
  add(b.memory == "host" ? "total (peak RSS)" : "total (peak)", "total",
      static_cast<int64_t>(b.total_measured_bytes), Confidence::high);
  return t.render();
}

// The engine's own figures next to the plan's ("num_gpu_blocks: server N / estimated M"), and
// where no memory was sampled the buffers it states ("weights (server.log): 1.06 / 1.06 MiB").
std::string engine_figures_text(const ProfileReport& r) {
  std::string out;
  for (const auto& row : r.comparison) {
    if (row.unit == "bytes") {
      if (!row.measured || row.measured_source == "samples") continue;
      const auto mib = [](double bytes) { return fmt::format("{:.2f} MiB", bytes / (1 << 20)); };
      const bool engine = row.measured_source != "host RSS" && row.measured_source != "residual";
      out += fmt::format("{} ({}): {} {} / estimated {}{}\n",
                         row.name == "activations" && engine ? "compute buffers" : row.name,
                         row.measured_source, engine ? "stated" : "measured", mib(*row.measured),
                         row.estimated ? mib(*row.estimated) : "-",
                         row.error_pct ? fmt::format(" ({:+.2f}%)", *row.error_pct) : "");
      continue;
    }
    out += fmt::format("{}: server {} / estimated {}{}\n", row.name,
                       row.measured ? fmt::format("{:.0f}", *row.measured) : "not reported",
                       row.estimated ? fmt::format("{:.0f}", *row.estimated) : "-",
                       row.error_pct ? fmt::format(" ({:+.2f}%)", *row.error_pct) : "");
  }
  return out;
}

}  // namespace

std::string summary_text(const ProfileReport& r) {
  std::string out;
  if (r.simulated) {
    out += "SIMULATED server (kvprof serve-sim): no real GPU or model was measured.\n";
  }
  out += fmt::format("kvprof profile {} -- {} at {}{}\n", r.run_id, r.model,
                     redact_secrets(r.endpoint), r.interrupted ? " (INTERRUPTED)" : "");
  out += condition_table(r);
  out += interrupted_text(r);
  out += low_sample_footnote(r);
  out += kv_source_footnote(r);
  out += derived_text(r.derived);
  if (!r.baseline.empty()) {
    out += fmt::format(
        "GPU memory used ({}, {} GPU{}): baseline {} GiB, post-warmup {} GiB, "
        "peak {} GiB (+{:.2f} GiB)\n",
        r.memory_source, r.baseline.per_gpu.size(), r.baseline.per_gpu.size() == 1 ? "" : "s",
        gib_text(r.baseline.sum_bytes),
        r.post_warmup.empty() ? "-" : gib_text(r.post_warmup.sum_bytes),
        r.peak.empty() ? "-" : gib_text(r.peak.sum_bytes),
        r.peak.empty() ? 0.0 : gib(r.peak.sum_bytes) - gib(r.baseline.sum_bytes));
  } else {
    out += "GPU memory: not sampled (" + r.memory_source + ")\n";
  }
  if (r.gpu_gaps.is_object() && r.gpu_gaps.value("filled_readings", 0) > 0 &&
      r.gpu_gaps["history"].is_string()) {
    out += fmt::format("GPU readings filled from {}: {} in {} gap(s) the live readings left\n",
                       r.gpu_gaps["history"].get<std::string>(),
                       r.gpu_gaps["filled_readings"].get<uint64_t>(), r.gpu_gaps["gaps"].size());
  }
  if (r.host && r.host->peak_rss_bytes) {
    out += fmt::format(
        "host memory of {} {}: peak RSS {}{}\n",
        r.host->process_group ? "the launched process group" : "pid", r.host->pid,
        format_bytes(*r.host->peak_rss_bytes),
        r.host->peak_pss_bytes ? ", peak PSS " + format_bytes(*r.host->peak_pss_bytes) : "");
  }
  if (r.breakdown) {
    const std::string what = r.breakdown->memory == "host"
                                 ? std::string("the server's peak RSS into the buffers it states")
                                 : fmt::format("GPU {}", r.breakdown->gpu);
    out += r.simulated ? fmt::format("breakdown of {}, {}:\n", what, k_simulated_nature)
                       : fmt::format("measured breakdown of {} (overall confidence {}):\n", what,
                                     confidence_name(r.breakdown->overall));
    out += breakdown_table(r);
  }
  out += engine_figures_text(r);
  out += estimate_check_text(r);
  for (const auto& w : r.warnings)
    out += "warning: " + w + "\n";
  out += "results: " + r.run_dir + "\n";
  return out;
}

}  // namespace kvprof::profile
