// Reading a run folder back (see run_data.hpp).
#include "kvprof/report/html/run_data.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <map>
#include <sstream>

#include "kvprof/report/html/csv.hpp"
#include "kvprof/results/run_folder.hpp"
#include "kvprof/util/time_text.hpp"

namespace kvprof::report::html {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

}  // namespace

namespace {

// Typed look-ups that treat a missing or mistyped field as absent.
const json& at(const json& j, std::string_view key) {
  static const json null_json;
  if (!j.is_object()) return null_json;
  const auto it = j.find(key);
  return it == j.end() ? null_json : *it;
}
std::optional<double> num(const json& j, std::string_view key) {
  const json& v = at(j, key);
  if (!v.is_number()) return std::nullopt;
  return v.get<double>();
}
std::string str(const json& j, std::string_view key, std::string fallback = {}) {
  const json& v = at(j, key);
  return v.is_string() ? v.get<std::string>() : fallback;
}

LatencyPercentiles percentiles(const json& j) {
  return {num(j, "p50").value_or(0), num(j, "p90").value_or(0), num(j, "p99").value_or(0),
          static_cast<uint64_t>(num(j, "n").value_or(0))};
}

bool is_concurrency_token(std::string_view t) {
  return t.size() > 1 && t[0] == 'c' &&
         std::all_of(t.begin() + 1, t.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The file a summary names for `role` (or the conventional name), when it exists.
std::optional<fs::path> run_file(const fs::path& dir, const json& summary,
                                 std::initializer_list<const char*> roles, const char* fallback) {
  for (const char* role : roles) {
    const std::string name = str(at(summary, "files"), role);
    // Only plain names inside the run folder.
    if (!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..") {
      std::error_code ec;  // a name too long for the file system is just absent
      if (fs::exists(dir / name, ec)) return dir / name;
    }
  }
  std::error_code ec;
  if (fs::exists(dir / fallback, ec)) return dir / fallback;
  return std::nullopt;
}

struct Clock {
  double origin_ns = 0;
  std::optional<double> wall_minus_mono_ns;  // maps the request trace's Unix times
  double seconds(double mono_ns) const { return (mono_ns - origin_ns) / 1e9; }
};

// Median of wall - mono over the first rows that have both.
std::optional<double> clock_offset(const std::vector<double>& mono_ns,
                                   const std::vector<double>& wall_ms) {
  std::vector<double> d;
  for (size_t i = 0; i < mono_ns.size() && d.size() < 101; ++i) {
    if (!std::isnan(mono_ns[i]) && !std::isnan(wall_ms[i]))
      d.push_back(wall_ms[i] * 1e6 - mono_ns[i]);
  }
  if (d.empty()) return std::nullopt;
  std::nth_element(d.begin(), d.begin() + static_cast<long>(d.size() / 2), d.end());
  return d[d.size() / 2];
}

struct GpuRows {
  std::vector<double> mono, wall, gpu, used, total;
};

Expected<std::optional<GpuRows>> read_gpu_trace(const fs::path& dir, const json& summary) {
  const auto path =
      run_file(dir, summary, {"gpu_mem_trace", "gpu_memory_trace"}, "gpu_mem_trace.csv");
  if (!path) return std::optional<GpuRows>();
  auto t = read_csv_file(
      *path,
      {{"t_mono_ns", "t_wall_ms", "gpu", "used_bytes", "total_bytes"}, {}, "kind", "device"});
  if (!t) return std::unexpected(t.error());
  GpuRows rows{std::move(t->numeric[0]), std::move(t->numeric[1]), std::move(t->numeric[2]),
               std::move(t->numeric[3]), std::move(t->numeric[4])};
  if (rows.mono.empty()) return std::optional<GpuRows>();
  return std::optional<GpuRows>(std::move(rows));
}

// Per-GPU series of used bytes, and the sum of the GPUs' total memory.
void add_gpu_series(RunData& run, const GpuRows& rows, const Clock& clock, Nature nature) {
  std::map<int, TimeSeries> by_gpu;
  std::map<int, double> total;
  for (size_t i = 0; i < rows.mono.size(); ++i) {
    if (std::isnan(rows.mono[i]) || std::isnan(rows.used[i]) || std::isnan(rows.gpu[i])) continue;
    const int gpu = static_cast<int>(rows.gpu[i]);
    auto& s = by_gpu[gpu];
    if (s.name.empty()) {
      s.name = fmt::format("GPU {} used", gpu);
      s.nature = nature;
    }
    s.t_s.push_back(clock.seconds(rows.mono[i]));
    s.value.push_back(rows.used[i]);
    if (!std::isnan(rows.total[i])) total[gpu] = rows.total[i];
  }
  for (auto& [gpu, s] : by_gpu)
    run.memory.push_back(std::move(s));
  if (!total.empty()) {
    double sum = 0;
    for (const auto& [gpu, t] : total)
      sum += t;
    run.capacity_bytes = sum;
  }
}

Expected<std::optional<TimeSeries>> read_host_trace(const fs::path& dir, const json& summary,
                                                    std::optional<double>& first_mono) {
  const auto path =
      run_file(dir, summary, {"host_mem_trace", "host_memory_trace"}, "host_mem_trace.csv");
  if (!path) return std::optional<TimeSeries>();
  auto t = read_csv_file(*path, {{"t_mono_ns", "rss_bytes"}, {}, {}, {}});
  if (!t) return std::unexpected(t.error());
  TimeSeries s;
  s.name = "host RSS";
  for (size_t i = 0; i < t->n_rows; ++i) {
    if (std::isnan(t->numeric[0][i]) || std::isnan(t->numeric[1][i])) continue;
    s.t_s.push_back(t->numeric[0][i]);  // mono ns for now: the origin is not known yet
    s.value.push_back(t->numeric[1][i]);
  }
  if (s.t_s.empty()) return std::optional<TimeSeries>();
  first_mono = s.t_s.front();
  return std::optional<TimeSeries>(std::move(s));
}

// Each condition's peak host RSS, from the process's samples in its window (a profile summary
// has per-condition peaks of GPU memory only).
void host_peaks_by_condition(RunData& run) {
  if (run.memory.empty()) return;
  const TimeSeries& rss = run.memory.front();
  for (auto& p : run.points) {
    if (p.peak_bytes) continue;
    for (const auto& w : run.windows) {
      if (w.label != p.label) continue;
      for (size_t i = 0; i < rss.t_s.size(); ++i) {
        if (rss.t_s[i] >= w.begin_s && rss.t_s[i] <= w.end_s) {
          p.peak_bytes = std::max(p.peak_bytes.value_or(0), rss.value[i]);
        }
      }
    }
  }
}

void rebase(TimeSeries& s, const Clock& clock) {
  for (double& t : s.t_s)
    t = clock.seconds(t);
}

Expected<void> read_metrics_trace(RunData& run, const fs::path& dir, const Clock& clock) {
  const auto path = run_file(dir, run.summary_json, {"metrics_trace"}, "metrics_trace.csv");
  if (!path) return {};
  auto t = read_csv_file(*path, {{"mono_ns", "kv_cache_usage"}, {}, "status", "ok"});
  if (!t) return std::unexpected(t.error());
  TimeSeries kv{"KV cache usage", Nature::engine_reported, {}, {}};
  for (size_t i = 0; i < t->n_rows; ++i) {
    if (std::isnan(t->numeric[0][i]) || std::isnan(t->numeric[1][i])) continue;
    kv.t_s.push_back(clock.seconds(t->numeric[0][i]));
    kv.value.push_back(t->numeric[1][i]);
  }
  if (!kv.t_s.empty()) run.kv_usage = std::move(kv);
  return {};
}

// Requests in flight from the request trace's send and end times (profile runs).
Expected<void> read_request_trace(RunData& run, const fs::path& dir, const Clock& clock) {
  if (!clock.wall_minus_mono_ns) return {};
  const auto path = run_file(dir, run.summary_json, {"request_trace"}, "request_trace.csv");
  if (!path) return {};
  auto t = read_csv_file(*path, {{"actual_send_unix_s", "end_unix_s"}, {}, {}, {}});
  if (!t) return std::unexpected(t.error());
  std::vector<std::pair<double, int>> events;
  for (size_t i = 0; i < t->n_rows; ++i) {
    const double send = t->numeric[0][i], end = t->numeric[1][i];
    if (std::isnan(send) || std::isnan(end)) continue;
    const auto to_s = [&](double unix_s) {
      return clock.seconds(unix_s * 1e9 - *clock.wall_minus_mono_ns);
    };
    events.emplace_back(to_s(send), +1);
    events.emplace_back(to_s(end), -1);
  }
  if (events.empty()) return {};
  std::sort(events.begin(), events.end());
  TimeSeries s{"requests in flight", Nature::measured, {}, {}};
  int n = 0;
  s.t_s.push_back(std::max(0.0, events.front().first - 1e-3));
  s.value.push_back(0);
  for (const auto& [time, delta] : events) {
    n += delta;
    if (!s.t_s.empty() && s.t_s.back() == time) {
      s.value.back() = n;
    } else {
      s.t_s.push_back(time);
      s.value.push_back(n);
    }
  }
  run.in_flight = std::move(s);
  return {};
}

void read_profile_summary(RunData& run, const Clock& clock) {
  const json& s = run.summary_json;
  run.model = str(at(s, "model_info"), "name", "?");
  const json& em = at(s, "engine_metadata");
  run.engine = str(em, "engine_type", "unknown");
  run.engine_version = str(em, "engine_version");
  // kvprof's own version; summaries before schema_version "2.0" kept it in profiler_version.
  run.kvprof_version = str(s, "kvprof_version", str(s, "profiler_version"));
  run.started_at = str(at(s, "metadata"), "started_at");
  std::vector<std::string> names;
  for (const auto& g : at(s, "gpus")) {
    const std::string name = str(g, "name");
    if (!name.empty() && std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(name);
  }
  const size_t n_gpus = at(s, "gpus").is_array() ? at(s, "gpus").size() : 0;
  run.device = names.empty() ? "no GPU sampled"
                             : fmt::format("{}{}", n_gpus > 1 ? fmt::format("{} x ", n_gpus) : "",
                                           fmt::format("{}", fmt::join(names, ", ")));
  const std::string source = str(s, "memory_source", "none");
  run.memory_nature = run.simulated || source == "simulated" ? Nature::simulated : Nature::measured;
  // Capture points at the middle of their windows.
  const json& mm = at(s, "memory_measurements");
  for (const auto& [key, label] :
       {std::pair{"baseline", "baseline"}, std::pair{"post_warmup", "post-warmup"},
        std::pair{"peak", "peak"}}) {
    const json& cp = at(mm, key);
    const auto begin = num(at(cp, "window"), "start_mono_ns");
    const auto end = num(at(cp, "window"), "end_mono_ns");
    if (!begin || !end) continue;
    const double t = key == std::string_view("peak") ? *end : (*begin + *end) / 2;
    run.captures.push_back({label, clock.seconds(t), num(cp, "total_bytes")});
  }
  // A server on the CPU: its RSS at the capture points.
  if (run.captures.empty()) {
    for (const auto& [name, phase] : at(at(s, "host_memory"), "phases").items()) {
      if (const auto t = num(phase, "t_mono_ns"); t && *t > 0) {
        run.captures.push_back({name == "post_warmup" ? "post-warmup" : name, clock.seconds(*t),
                                num(phase, "rss_bytes")});
      }
    }
    std::sort(run.captures.begin(), run.captures.end(),
              [](const Marker& a, const Marker& b) { return a.t_s < b.t_s; });
  }
  // The peak's time is where the sum of the GPUs was highest.
  if (!run.captures.empty() && run.captures.back().label == "peak" && !run.memory.empty()) {
    const auto& m = run.memory.front();
    const auto it = std::max_element(m.value.begin(), m.value.end());
    if (it != m.value.end() && run.memory.size() == 1) {
      run.captures.back().t_s = m.t_s[static_cast<size_t>(it - m.value.begin())];
    }
  }
  // The whole-run estimate (vLLM-like engines preallocate: the same at every concurrency).
  std::optional<double> estimate_total;
  const json& cmp = at(s, "estimate_comparison");
  std::map<std::string, const json*> rows;
  for (const auto& row : at(cmp, "rows"))
    rows[str(row, "component")] = &row;
  if (rows.contains("total")) estimate_total = num(*rows["total"], "estimated");
  run.estimate_note = str(cmp, "estimate_flags");
  run.breakdown_nature = str(at(s, "memory_breakdown"), "nature", "measured");
  for (const auto& c : at(s, "conditions")) {
    ConditionPoint p;
    p.label = str(c, "condition_id");
    p.group = condition_group(p.label);
    p.concurrency = static_cast<uint32_t>(num(c, "concurrency").value_or(0));
    p.input_len = input_len_of(p.label);
    // GPU memory, else the server's host RSS in the condition's window (a server on the CPU).
    p.peak_bytes = num(c, "peak_used_bytes");
    if (!p.peak_bytes) p.peak_bytes = num(c, "peak_rss_bytes");
    p.estimate_bytes = estimate_total;
    p.kv_peak_fraction = num(c, "peak_kv_cache_usage");
    p.tokens_per_s = num(c, "output_tokens_per_s");
    p.ttft_ms = percentiles(at(c, "ttft_ms"));
    p.itl_ms = percentiles(at(c, "itl_ms"));
    p.e2e_ms = percentiles(at(c, "e2e_ms"));
    run.points.push_back(p);
    const auto begin = num(at(c, "window"), "start_mono_ns");
    const auto end = num(at(c, "window"), "end_mono_ns");
    if (begin && end) run.windows.push_back({p.label, clock.seconds(*begin), clock.seconds(*end)});
  }
  // The breakdown: measured from memory_breakdown, estimated from the comparison.
  const json& bd = at(s, "memory_breakdown");
  for (const auto& [key, name] :
       {std::pair{"weights", "weights"}, std::pair{"kv_cache", "KV cache"},
        std::pair{"activations", "activations"}, std::pair{"cuda_graphs", "CUDA graphs"},
        std::pair{"overhead", "overhead"}}) {
    const json& c = at(at(bd, "components"), key);
    Component comp{name, num(c, "bytes"), std::nullopt, str(c, "confidence"), run.memory_nature};
    if (rows.contains(key)) comp.estimated_bytes = num(*rows[key], "estimated");
    if (comp.measured_bytes || comp.estimated_bytes) run.components.push_back(comp);
  }
  // Startup phases of a launched server.
  const json& launch = at(s, "launch");
  if (const auto launched = num(launch, "launched_mono_ns")) {
    for (const auto& ph : at(launch, "phases")) {
      const auto b = num(ph, "begin_s"), e = num(ph, "end_s");
      if (!b || !e) continue;
      run.phases.push_back({str(ph, "phase"), clock.seconds(*launched + *b * 1e9),
                            clock.seconds(*launched + *e * 1e9)});
    }
  }
  for (const auto& w : at(s, "warnings"))
    if (w.is_string()) run.warnings.push_back(w.get<std::string>());
}

void read_bench_summary(RunData& run, const Clock& clock) {
  const json& s = run.summary_json;
  const json& lib = at(at(s, "engine"), "library");
  run.model = str(at(s, "model_info"), "description", str(at(s, "settings"), "model", "?"));
  const std::string path = str(at(s, "settings"), "model");
  if (!path.empty()) run.model += " (" + fs::path(path).filename().string() + ")";
  run.engine = "llama.cpp (in-process)";
  if (const auto t = num(s, "started_unix_s")) run.started_at = iso_utc(*t);
  run.engine_version = str(lib, "llama_version");
  const bool gpu = str(s, "memory_source") == "nvml";
  run.memory_kind = gpu ? "GPU" : "host";
  std::string cpu;
  for (const auto& d : at(lib, "devices"))
    if (str(d, "type") == "cpu" && cpu.empty()) cpu = str(d, "description");
  run.device = gpu ? "GPU (NVML)" : fmt::format("CPU{}", cpu.empty() ? "" : " (" + cpu + ")");
  for (const auto& c : at(s, "conditions")) {
    if (!at(c, "started").is_boolean() || !at(c, "started").get<bool>()) continue;
    ConditionPoint p;
    // Profile's names; a bench summary of the first layout (schema 1) had its own.
    p.label = str(c, "condition_id", str(c, "condition"));
    p.group = condition_group(p.label);
    p.concurrency = static_cast<uint32_t>(num(c, "concurrency").value_or(0));
    // Every sequence's prompt, when they are alike (a mixed batch has none).
    const json& prompts = at(c, "prompt_tokens");
    if (prompts.is_array() && !prompts.empty() && prompts.front().is_number_unsigned()) {
      const auto first = prompts.front().get<uint64_t>();
      if (first <= UINT32_MAX && std::all_of(prompts.begin(), prompts.end(), [&](const json& v) {
            return v.is_number_unsigned() && v.get<uint64_t>() == first;
          })) {
        p.input_len = static_cast<uint32_t>(first);
      }
    }
    p.peak_bytes = gpu ? num(c, "peak_gpu_used_bytes") : num(c, "peak_rss_bytes");
    p.estimate_bytes = num(at(c, "estimate"), gpu ? "gpu_total_bytes" : "host_total_bytes");
    p.tokens_per_s = num(c, "output_tokens_per_s");
    if (!p.tokens_per_s) p.tokens_per_s = num(c, "tokens_per_second");
    const json& lat = at(c, "ttft_ms").is_object() ? c : at(c, "latency_stats");
    p.ttft_ms = percentiles(at(lat, "ttft_ms"));
    p.itl_ms = percentiles(at(lat, "itl_ms"));
    p.e2e_ms = percentiles(at(lat, "e2e_ms"));
    run.points.push_back(p);
    const auto begin = num(c, "start_mono_ns"), end = num(c, "end_mono_ns");
    if (begin && end && *begin > 0 && *end >= *begin) {
      run.windows.push_back({p.label, clock.seconds(*begin), clock.seconds(*end)});
    }
  }
  for (const auto& [name, phase] : at(at(s, "host_memory"), "phases").items()) {
    if (const auto t = num(phase, "t_mono_ns"); t && *t > 0) {
      run.captures.push_back({name, clock.seconds(*t), num(phase, "rss_bytes")});
    }
  }
  std::sort(run.captures.begin(), run.captures.end(),
            [](const Marker& a, const Marker& b) { return a.t_s < b.t_s; });
  const json& bd = at(s, "memory_breakdown");
  const json& plan = at(bd, "estimate");
  // The comparison (--estimate-with's plan, or the run's own settings') as profile's; a run
  // written before it has only the plan in memory_breakdown.
  const json& cmp = at(s, "estimate_comparison");
  std::map<std::string, const json*> rows;
  for (const auto& row : at(cmp, "rows"))
    rows[str(row, "component")] = &row;
  for (const auto& [key, name, plan_key] :
       {std::tuple{"weights", "weights", "weights_bytes"},
        std::tuple{"kv_cache", "KV cache", "kv_cache_bytes"},
        std::tuple{"activations", "activations", "compute_bytes"},
        std::tuple{"overhead", "overhead", ""}}) {
    const json& c = at(at(bd, "components").is_object() ? at(bd, "components") : bd, key);
    Component comp{
        name, num(c, "bytes"), std::nullopt, str(c, "confidence"),
        std::string_view(key) == "overhead" ? Nature::measured : Nature::engine_reported};
    if (rows.contains(key)) {
      comp.estimated_bytes = num(*rows[key], "estimated");
    } else if (*plan_key != '\0' && rows.empty()) {
      comp.estimated_bytes = num(plan, plan_key);
    }
    if (comp.measured_bytes || comp.estimated_bytes) run.components.push_back(comp);
  }
  run.estimate_note = rows.empty() ? str(plan, "method") : str(cmp, "estimate_flags");
  for (const auto& w : at(s, "warnings"))
    if (w.is_string()) run.warnings.push_back(w.get<std::string>());
}

}  // namespace

const char* nature_name(Nature nature) {
  switch (nature) {
    case Nature::measured:
      return "measured";
    case Nature::engine_reported:
      return "engine-reported";
    case Nature::estimated:
      return "estimated";
    case Nature::simulated:
      return "simulated";
    case Nature::reference:
      return "reference";
  }
  return "measured";
}

std::optional<uint32_t> input_len_of(const std::string& label) {
  if (!label.starts_with("in")) return std::nullopt;
  uint32_t n = 0;
  const auto end = label.data() + label.size();
  const auto [ptr, ec] = std::from_chars(label.data() + 2, end, n);
  if (ec != std::errc() || ptr == label.data() + 2 || (ptr != end && *ptr != '_'))
    return std::nullopt;
  return n;
}

std::string condition_group(const std::string& label) {
  std::string out;
  size_t i = 0;
  while (i <= label.size()) {
    size_t j = label.find_first_of("_ ", i);
    if (j == std::string::npos) j = label.size();
    const std::string_view token(label.data() + i, j - i);
    if (!token.empty() && !is_concurrency_token(token)) {
      if (!out.empty()) out.push_back(j < label.size() ? label[j] : (i > 0 ? label[i - 1] : '_'));
      out.append(token);
    }
    i = j + 1;
  }
  return out.empty() ? "all" : out;
}

Expected<RunData> load_run_data(const fs::path& dir) {
  auto folder = results::open_run_folder(dir);
  if (!folder) return std::unexpected(folder.error());
  RunData run;
  run.dir = dir;
  run.summary = std::move(folder->summary);
  run.summary_json = std::move(folder->summary_json);
  const json& s = run.summary_json;
  run.run_id = run.summary.id;
  run.kind = run.summary.kind;
  run.simulated = run.summary.simulated;
  run.interrupted = run.summary.interrupted;
  // Traces: everything on CLOCK_MONOTONIC; the origin is the first sample of any.
  auto gpu = read_gpu_trace(dir, s);
  if (!gpu) return std::unexpected(gpu.error());
  std::optional<double> host_first;
  auto host = read_host_trace(dir, s, host_first);
  if (!host) return std::unexpected(host.error());
  Clock clock;
  std::vector<double> firsts;
  if (*gpu) {
    firsts.push_back(*std::min_element((*gpu)->mono.begin(), (*gpu)->mono.end()));
    clock.wall_minus_mono_ns = clock_offset((*gpu)->mono, (*gpu)->wall);
  }
  if (host_first) firsts.push_back(*host_first);
  for (const char* key : {"baseline"}) {
    if (const auto t = num(at(at(at(s, "memory_measurements"), key), "window"), "start_mono_ns"))
      firsts.push_back(*t);
  }
  if (const auto t = num(at(s, "launch"), "launched_mono_ns")) firsts.push_back(*t);
  clock.origin_ns = firsts.empty() ? 0 : *std::min_element(firsts.begin(), firsts.end());
  if (!clock.wall_minus_mono_ns) {
    // The metrics trace has both clocks too.
    if (const auto path = run_file(dir, s, {"metrics_trace"}, "metrics_trace.csv")) {
      auto t = read_csv_file(*path, {{"mono_ns", "wall_ms"}, {}, {}, {}});
      if (t) clock.wall_minus_mono_ns = clock_offset(t->numeric[0], t->numeric[1]);
    }
  }
  if (run.kind == "bench") run.kvprof_version = str(folder->manifest_json, "kvprof_version");
  const Nature nature = run.simulated ? Nature::simulated : Nature::measured;
  if (*gpu) add_gpu_series(run, **gpu, clock, nature);
  if (*host) {
    rebase(**host, clock);
    (*host)->nature = nature;
    if (run.memory.empty()) {
      // No GPU sampled (a CPU bench, a llama.cpp server on this host): the memory of the run is
      // the engine's or the server's process.
      (*host)->name = run.kind == "bench" ? "engine process RSS" : "server process RSS";
      run.memory_kind = "host";
      run.memory.push_back(std::move(**host));
    } else {
      run.host_rss = std::move(**host);
    }
  }
  if (auto ok = read_metrics_trace(run, dir, clock); !ok) return std::unexpected(ok.error());
  if (run.kind == "bench") {
    read_bench_summary(run, clock);
  } else {
    if (auto ok = read_request_trace(run, dir, clock); !ok) return std::unexpected(ok.error());
    read_profile_summary(run, clock);
    if (run.memory_kind == "host") host_peaks_by_condition(run);
  }
  double end_s = 0;
  for (const auto& m : run.memory)
    if (!m.t_s.empty()) end_s = std::max(end_s, m.t_s.back());
  run.duration_s = end_s;
  return run;
}

}  // namespace kvprof::report::html
