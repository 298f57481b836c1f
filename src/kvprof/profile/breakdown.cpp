// Measured breakdown and comparison with an estimate (see breakdown.hpp).
#include "kvprof/profile/breakdown.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace kvprof::profile {

std::string_view confidence_name(Confidence c) {
  switch (c) {
    case Confidence::high:
      return "high";
    case Confidence::medium:
      return "medium";
    case Confidence::low:
      return "low";
    case Confidence::none:
      break;
  }
  return "none";
}

CapturePoint capture_point(std::string name, const std::vector<MemoryPoint>& points, Window window,
                           bool use_max) {
  CapturePoint cp;
  cp.name = std::move(name);
  cp.window = window;
  cp.per_gpu = memory_in(points, window);
  if (cp.per_gpu.empty()) return cp;
  long double sum = 0;
  for (const auto& g : cp.per_gpu) {
    const uint64_t used = use_max ? g.max_used_bytes : g.mean_used_bytes;
    cp.used_bytes.push_back(used);
    cp.sum_bytes += used;
    cp.max_bytes = std::max(cp.max_bytes, used);
    sum += static_cast<long double>(used);
  }
  const auto n = static_cast<long double>(cp.used_bytes.size());
  const long double mean = sum / n;
  long double var = 0;
  for (uint64_t used : cp.used_bytes) {
    const long double d = static_cast<long double>(used) - mean;
    var += d * d;
  }
  cp.mean_bytes = static_cast<double>(mean);
  cp.stddev_bytes = static_cast<double>(std::sqrt(var / n));
  return cp;
}

namespace {

uint64_t sub_clamped(uint64_t a, uint64_t b) {
  return a > b ? a - b : 0;
}

uint64_t to_bytes(double value) {
  return value <= 0 ? 0 : static_cast<uint64_t>(std::llround(value));
}

}  // namespace

MeasuredBreakdown measure_breakdown(const BreakdownInput& in) {
  MeasuredBreakdown out;
  out.gpu = in.gpu;
  out.total_measured_bytes =
      in.peak_bytes.value_or(in.post_warmup_bytes.value_or(in.baseline_bytes.value_or(0)));

  // KV cache: preallocated pool from the block count, or an on-demand pool from its growth.
  uint64_t kv_preallocated = 0;
  uint64_t kv_growth_in_grid = 0;
  if (in.num_gpu_blocks && in.kv_bytes_per_block) {
    kv_preallocated = *in.num_gpu_blocks * *in.kv_bytes_per_block;
    out.kv_cache = {static_cast<int64_t>(kv_preallocated), Confidence::high,
                    fmt::format("{} blocks (server /metrics) x {} B per block (model)",
                                *in.num_gpu_blocks, *in.kv_bytes_per_block)};
  } else if (in.kv_growth_bytes_per_usage && in.peak_kv_cache_usage) {
    const double per_usage = *in.kv_growth_bytes_per_usage;
    out.kv_cache = {static_cast<int64_t>(to_bytes(per_usage * *in.peak_kv_cache_usage)),
                    Confidence::medium,
                    fmt::format("memory growth with the KV gauge (on-demand pool) at {:.0f}% usage",
                                *in.peak_kv_cache_usage * 100)};
    kv_growth_in_grid =
        to_bytes(per_usage * (*in.peak_kv_cache_usage - in.post_warmup_kv_cache_usage.value_or(0)));
  } else if (in.num_gpu_blocks) {
    out.kv_cache.method = fmt::format(
        "{} blocks reported, bytes per block unknown (give --estimate-with)", *in.num_gpu_blocks);
  } else {
    out.kv_cache.method =
        "the server reports no KV block count and the memory did not grow with "
        "its KV gauge";
  }

  // Weights: the loaded server at baseline, less the preallocated pool and fixed overhead.
  if (in.baseline_bytes) {
    uint64_t weights = sub_clamped(*in.baseline_bytes, kv_preallocated);
    weights = sub_clamped(weights, in.fixed_overhead_bytes.value_or(0));
    const bool kv_known = out.kv_cache.bytes.has_value();
    const bool overhead_known = in.fixed_overhead_bytes.has_value();
    const Confidence c = kv_known && overhead_known   ? Confidence::high
                         : kv_known || overhead_known ? Confidence::medium
                                                      : Confidence::low;
    std::string method = "baseline memory";
    if (kv_preallocated > 0) method += " - KV pool";
    if (overhead_known) method += " - estimated CUDA context, non-torch and CUDA graphs";
    if (!kv_known && !overhead_known) method += " (includes any preallocated KV pool and overhead)";
    out.weights = {static_cast<int64_t>(weights), c, method};
  } else {
    out.weights.method = "no baseline memory sample";
  }

  // Activations: what the grid added on top of the warmed-up server, less KV growth.
  if (in.peak_bytes && in.post_warmup_bytes) {
    const uint64_t added = sub_clamped(*in.peak_bytes, *in.post_warmup_bytes);
    out.activations = {
        static_cast<int64_t>(sub_clamped(added, kv_growth_in_grid)), Confidence::medium,
        kv_growth_in_grid > 0 ? "peak - post-warmup - KV growth" : "peak - post-warmup"};
  } else {
    out.activations.method = "no post-warmup or peak sample";
  }

  // Overhead: the residual of the peak.
  if (in.peak_bytes && out.weights.bytes) {
    const int64_t accounted =
        *out.weights.bytes + out.kv_cache.bytes.value_or(0) + out.activations.bytes.value_or(0);
    out.overhead = {static_cast<int64_t>(*in.peak_bytes) - accounted,
                    in.fixed_overhead_bytes ? Confidence::medium : Confidence::low,
                    "residual: peak - weights - KV cache - activations"};
  } else {
    out.overhead.method = "no peak sample";
  }
  out.overall = std::min(out.weights.confidence, out.kv_cache.confidence);
  return out;
}

std::optional<MeasuredBreakdown> host_breakdown(const nlohmann::json& engine_reported,
                                                std::optional<uint64_t> peak_rss_bytes) {
  const auto bytes_of = [&](const char* name) -> std::optional<int64_t> {
    const auto components = engine_reported.find("components");
    if (components == engine_reported.end() || !components->is_object()) return std::nullopt;
    const auto c = components->find(name);
    if (c == components->end() || !c->is_object()) return std::nullopt;
    const auto b = c->find("bytes");
    if (b == c->end() || !b->is_number_integer()) return std::nullopt;
    return b->get<int64_t>();
  };
  const auto weights = bytes_of("weights");
  if (!peak_rss_bytes || !weights) return std::nullopt;
  const std::string source = engine_reported.value("source", std::string("the engine"));
  MeasuredBreakdown out;
  out.memory = "host";
  out.total_measured_bytes = *peak_rss_bytes;
  const auto stated = [&](std::optional<int64_t> b, const std::string& what) {
    return b ? Component{b, Confidence::high,
                         fmt::format("{} as the engine states it ({}), "
                                     "reserved",
                                     what, source)}
             : Component{std::nullopt, Confidence::none,
                         fmt::format("the engine states no {}", what)};
  };
  out.weights = stated(weights, "model buffer");
  out.kv_cache = stated(bytes_of("kv_cache"), "KV buffer");
  out.activations = stated(bytes_of("compute"), "compute buffers");
  const int64_t parts =
      *weights + out.kv_cache.bytes.value_or(0) + out.activations.bytes.value_or(0);
  out.overhead = {static_cast<int64_t>(*peak_rss_bytes) - parts, Confidence::medium,
                  "residual: peak RSS - weights - KV cache - compute buffers (below zero: reserved "
                  "pages the process never touched)"};
  out.overall = std::min(out.weights.confidence, out.kv_cache.confidence);
  return out;
}

std::optional<double> fit_kv_growth(const std::vector<MemoryPoint>& memory,
                                    const std::vector<MetricsPoint>& metrics, unsigned gpu,
                                    Window window) {
  std::vector<const MemoryPoint*> mem;
  for (const auto& p : memory) {
    if (p.gpu == gpu) mem.push_back(&p);
  }
  std::sort(mem.begin(), mem.end(),
            [](const MemoryPoint* a, const MemoryPoint* b) { return a->t_mono_ns < b->t_mono_ns; });
  std::vector<std::pair<double, double>> pairs;  // (usage, used bytes)
  for (const auto& m : metrics) {
    if (!window.contains(m.t_mono_ns) || !m.snapshot.kv_cache_usage) continue;
    const double usage = *m.snapshot.kv_cache_usage;
    if (!std::isfinite(usage)) continue;
    auto it = std::upper_bound(mem.begin(), mem.end(), m.t_mono_ns,
                               [](int64_t t, const MemoryPoint* p) { return t < p->t_mono_ns; });
    if (it == mem.begin()) continue;
    pairs.emplace_back(usage, static_cast<double>((*std::prev(it))->used_bytes));
  }
  if (pairs.size() < 5) return std::nullopt;
  double mu = 0, mm = 0, lo = pairs[0].first, hi = pairs[0].first;
  for (const auto& [u, m] : pairs) {
    mu += u;
    mm += m;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  const auto n = static_cast<double>(pairs.size());
  mu /= n;
  mm /= n;
  double suu = 0, smm = 0, sum_m = 0;
  for (const auto& [u, m] : pairs) {
    suu += (u - mu) * (u - mu);
    smm += (m - mm) * (m - mm);
    sum_m += (u - mu) * (m - mm);
  }
  if (hi - lo < 0.05 || suu <= 0 || smm <= 0) return std::nullopt;
  const double slope = sum_m / suu;
  const double r2 = (sum_m * sum_m) / (suu * smm);
  if (slope <= 0 || r2 < 0.8) return std::nullopt;
  return slope;
}

namespace {

ComparisonRow row(std::string name, std::string unit, std::optional<double> measured,
                  std::optional<double> estimated, Confidence confidence) {
  ComparisonRow r{std::move(name), std::move(unit), measured, estimated, std::nullopt, confidence};
  if (measured && estimated && *measured > 0) {
    r.error_pct = (*estimated - *measured) / *measured * 100.0;
  }
  return r;
}

std::optional<double> opt(const std::optional<uint64_t>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

}  // namespace

std::vector<ComparisonRow> compare_with_estimate(const MeasuredBreakdown& m,
                                                 const MetricsWindowStats& server,
                                                 const estimate::Estimate& est) {
  const auto& e = est.per_gpu;
  const auto d = [](uint64_t v) { return static_cast<double>(v); };
  std::vector<ComparisonRow> rows;
  rows.push_back(row("weights", "bytes", opt(m.weights.bytes), d(e.weights_bytes + e.draft_bytes),
                     m.weights.confidence));
  rows.push_back(
      row("kv_cache", "bytes", opt(m.kv_cache.bytes), d(e.kv_cache_bytes), m.kv_cache.confidence));
  rows.push_back(row("activations", "bytes", opt(m.activations.bytes), d(e.activation_bytes),
                     m.activations.confidence));
  rows.push_back(row("overhead", "bytes", opt(m.overhead.bytes),
                     static_cast<double>(e.overhead_bytes()), m.overhead.confidence));
  rows.push_back(row(
      "total", "bytes",
      m.total_measured_bytes > 0 ? std::optional<double>(d(m.total_measured_bytes)) : std::nullopt,
      d(e.total_bytes), m.total_measured_bytes > 0 ? Confidence::high : Confidence::none));
  if (est.engine_report.num_gpu_blocks > 0) {
    rows.push_back(row("num_gpu_blocks", "blocks", opt(server.num_gpu_blocks),
                       d(est.engine_report.num_gpu_blocks),
                       server.num_gpu_blocks ? Confidence::high : Confidence::none));
  }
  if (est.engine_report.kv_cache_tokens > 0) {
    rows.push_back(row("kv_cache_tokens", "tokens", opt(server.kv_cache_capacity_tokens),
                       d(est.engine_report.kv_cache_tokens),
                       server.kv_cache_capacity_tokens ? Confidence::high : Confidence::none));
  }
  return rows;
}

void compare_with_engine_figures(std::vector<ComparisonRow>& rows,
                                 const nlohmann::json& engine_reported,
                                 const nlohmann::json& planned,
                                 std::optional<uint64_t> peak_rss_bytes) {
  const auto set = [](ComparisonRow& r, double measured, Confidence c, std::string source) {
    r.measured = measured;
    r.measured_confidence = c;
    r.measured_source = std::move(source);
    r.error_pct = measured > 0 && r.estimated
                      ? std::optional<double>((*r.estimated - measured) / measured * 100.0)
                      : std::nullopt;
  };
  const nlohmann::json* parts = nullptr;
  std::string source = "engine";
  if (engine_reported.is_object() && engine_reported.contains("components") &&
      engine_reported["components"].is_object()) {
    parts = &engine_reported["components"];
    if (engine_reported.contains("source") && engine_reported["source"].is_string())
      source = engine_reported["source"].get<std::string>();
  }
  for (auto& r : rows) {
    if (r.measured || r.unit != "bytes") continue;
    if (r.name == "total") {
      if (peak_rss_bytes)
        set(r, static_cast<double>(*peak_rss_bytes), Confidence::medium, "host RSS");
      continue;
    }
    // The plan's activations are llama.cpp's compute buffers.
    const std::string part = r.name == "activations" ? "compute" : r.name;
    if (parts == nullptr || !parts->contains(part)) continue;
    const auto& bytes = (*parts)[part]["bytes"];
    if (planned.contains("components") && planned["components"].contains(part)) {
      const auto& p = planned["components"][part]["bytes"];
      if (p.is_number_unsigned()) r.estimated = static_cast<double>(p.get<uint64_t>());
    }
    if (bytes.is_number_unsigned()) {
      set(r, static_cast<double>(bytes.get<uint64_t>()), Confidence::high, source);
    }
  }
  // Overhead is the residual on both sides, as in the breakdown: the total less the buffers the
  // engine reserves (below zero where reserved pages are never touched), so each side adds up.
  std::map<std::string, ComparisonRow*> by_name;
  for (auto& r : rows)
    by_name[r.name] = &r;
  const char* parts_of_total[] = {"weights", "kv_cache", "activations"};
  ComparisonRow* overhead = by_name.contains("overhead") ? by_name["overhead"] : nullptr;
  ComparisonRow* total = by_name.contains("total") ? by_name["total"] : nullptr;
  if (overhead == nullptr || total == nullptr || overhead->measured) return;
  const auto residual = [&](std::optional<double> ComparisonRow::*field) -> std::optional<double> {
    if (!(total->*field)) return std::nullopt;
    double rest = *(total->*field);
    for (const char* name : parts_of_total) {
      const auto it = by_name.find(name);
      if (it == by_name.end() || !(it->second->*field)) return std::nullopt;
      rest -= *(it->second->*field);
    }
    return rest;
  };
  const auto measured = residual(&ComparisonRow::measured);
  if (!measured || by_name["activations"]->measured_source == "samples") return;
  if (const auto estimated = residual(&ComparisonRow::estimated)) overhead->estimated = estimated;
  overhead->measured = measured;
  overhead->measured_confidence = Confidence::medium;
  overhead->measured_source = "residual";
  overhead->error_pct =
      *measured > 0 && overhead->estimated
          ? std::optional<double>((*overhead->estimated - *measured) / *measured * 100.0)
          : std::nullopt;
}

}  // namespace kvprof::profile
