// Steps of a profile run (see run_steps.hpp).
#include "kvprof/profile/run_steps.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "kvprof/client/raw_request.hpp"
#include "kvprof/gpu/gap_fill.hpp"
#include "kvprof/profile/breakdown.hpp"
#include "kvprof/profile/estimate_check.hpp"
#include "kvprof/profile/manifest.hpp"
#include "kvprof/sys/proc.hpp"
#include "kvprof/util/clock.hpp"

namespace kvprof::profile {

namespace {

std::optional<size_t> gpu_position(const CapturePoint& cp, unsigned gpu) {
  for (size_t i = 0; i < cp.per_gpu.size(); ++i) {
    if (cp.per_gpu[i].gpu == gpu) return i;
  }
  return std::nullopt;
}

}  // namespace

Expected<std::unique_ptr<gpu::Sampler>> start_sampler(const ProfileConfig& config,
                                                      const ProfileDeps& deps,
                                                      const std::filesystem::path& dir,
                                                      std::optional<pid_t> launched_pid,
                                                      Timeline& timeline, ProfileReport& report) {
  gpu::SamplerOptions so;
  so.gpus = config.gpus;
  so.interval_ms = config.gpu_interval_ms;
  so.process_interval_ms = config.process_interval_ms;
  so.host_interval_ms = config.host_interval_ms;
  so.on_device_sample = [&timeline](const gpu::DeviceSample& s) { timeline.add_memory(s); };
  so.on_host_sample = [&timeline](int64_t t_ns, const sys::HostMemory& m) {
    timeline.add_host(t_ns, m);
  };
  if (deps.memory) so.gpu_trace_path = (dir / "gpu_mem_trace.csv").string();
  if (config.host_pid) {
    so.host_pid = config.host_pid;
  } else if (launched_pid && config.host_pid_auto) {
    // The launched command's whole process group: a shell line's server, and the workers an
    // engine forks (vLLM's engine core), are all counted.
    so.host_pid = launched_pid;
    so.host_pid_is_group = true;
  } else if (config.host_pid_auto) {
    if (auto port = client::loopback_port(config.run.endpoint)) {
      if (auto pid = sys::find_listening_pid(*port); pid && *pid != getpid()) so.host_pid = *pid;
    }
  }
  if (so.host_pid) {
    so.host_trace_path = (dir / "host_mem_trace.csv").string();
    report.files["host_mem_trace"] = "host_mem_trace.csv";
  }
  std::unique_ptr<gpu::Sampler> sampler;
  if (deps.memory || so.host_pid) {
    sampler = std::make_unique<gpu::Sampler>(deps.memory, so);
    if (auto ok = sampler->start(); !ok) {
      if (ok.error().kind == ErrorKind::io) return std::unexpected(ok.error());
      return std::unexpected(ok.error().with_context("GPU sampler"));
    }
    if (deps.memory) {
      for (unsigned g : sampler->gpus()) {
        auto info = deps.memory->device_info(g);
        report.gpus.push_back(info ? *info : gpu::DeviceInfo{g, std::nullopt, std::nullopt});
      }
    }
  }
  if (!deps.memory) {
    std::FILE* f = std::fopen((dir / "gpu_mem_trace.csv").c_str(), "w");
    if (f == nullptr)
      return fail(ErrorKind::io, "cannot write gpu_mem_trace.csv in " + dir.string());
    std::fprintf(f, "%s\n", gpu::k_gpu_trace_header);
    std::fclose(f);
  }
  return sampler;
}

void stop_launched(const LaunchSettings& settings, LaunchedServer& server, const Timeline& timeline,
                   bool have_memory, LaunchReport& launch) {
  launch.stop = server.stop(settings.grace_s);
  if (!have_memory) return;
  launch.used_before_launch_bytes = used_at(timeline.memory(), launch.launched_ns);
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(settings.release_wait_s);
  for (;;) {
    launch.used_after_stop_bytes = used_at(timeline.memory(), monotonic_now_ns());
    if (launch.used_before_launch_bytes && launch.used_after_stop_bytes) {
      launch.memory_released = *launch.used_after_stop_bytes <=
                               *launch.used_before_launch_bytes + k_memory_released_slack_bytes;
    }
    if (launch.memory_released.value_or(false) || std::chrono::steady_clock::now() >= end) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

std::optional<std::string> fill_memory_gaps(gpu::MemorySource& source, const gpu::Sampler& sampler,
                                            uint32_t interval_ms, const std::filesystem::path& dir,
                                            Timeline& timeline, ProfileReport& report) {
  std::vector<gpu::SampleTime> live;
  for (const auto& p : timeline.memory())
    live.push_back({p.t_mono_ns, p.gpu});
  const int64_t begin_ns = sampler.started_mono_ns();
  const int64_t end_ns = monotonic_now_ns();
  auto fill = gpu::fill_gaps(source, live, sampler.gpus(), begin_ns, end_ns, interval_ms,
                             gpu::mono_minus_wall_ns_now());
  std::optional<std::string> trace_error;
  if (!fill.filled.empty()) {
    for (const auto& s : fill.filled)
      timeline.add_memory(s);
    if (auto ok = gpu::merge_into_trace((dir / "gpu_mem_trace.csv").string(), fill.filled); !ok) {
      trace_error = ok.error().message;
    }
  }
  nlohmann::json gaps = nlohmann::json::array();
  for (const auto& g : fill.gaps) {
    const auto filled = std::count_if(fill.filled.begin(), fill.filled.end(), [&](const auto& s) {
      return s.memory.gpu == g.gpu && s.t_mono_ns > g.from_mono_ns && s.t_mono_ns < g.to_mono_ns;
    });
    gaps.push_back({{"gpu", g.gpu},
                    {"from_s", static_cast<double>(g.from_mono_ns - begin_ns) / 1e9},
                    {"to_s", static_cast<double>(g.to_mono_ns - begin_ns) / 1e9},
                    {"filled_readings", filled}});
  }
  report.gpu_gaps = {{"gaps", gaps},
                     {"filled_readings", fill.filled.size()},
                     {"history", fill.history ? nlohmann::json(*fill.history) : nullptr},
                     {"error", fill.error ? nlohmann::json(*fill.error) : nullptr},
                     {"note",
                      "from_s/to_s: seconds since GPU sampling began; filled readings "
                      "are in gpu_mem_trace.csv as device rows, in time order"}};
  if (fill.gaps.empty()) return std::nullopt;
  double missing_s = 0;
  for (const auto& g : fill.gaps)
    missing_s += static_cast<double>(g.to_mono_ns - g.from_mono_ns) / 1e9;
  if (trace_error) return "GPU readings filled from history were not written: " + *trace_error;
  if (!fill.history) {
    return fmt::format(
        "GPU memory has {} gap(s) without readings ({:.1f} s in all); this source "
        "keeps no history to fill them",
        fill.gaps.size(), missing_s);
  }
  if (fill.error) {
    return fmt::format("GPU memory has {} gap(s) without readings ({:.1f} s in all); {} failed: {}",
                       fill.gaps.size(), missing_s, *fill.history, *fill.error);
  }
  if (fill.filled.empty()) {
    return fmt::format(
        "GPU memory has {} gap(s) without readings ({:.1f} s in all); {} had none "
        "either",
        fill.gaps.size(), missing_s, *fill.history);
  }
  return std::nullopt;
}

void analyse_memory(const ProfileConfig& config, const std::vector<MemoryPoint>& memory,
                    const std::vector<MetricsPoint>& metrics, Window load, Window post_warmup,
                    ProfileReport& report) {
  if (!report.peak.empty()) {
    const size_t busiest = static_cast<size_t>(
        std::max_element(report.peak.used_bytes.begin(), report.peak.used_bytes.end()) -
        report.peak.used_bytes.begin());
    BreakdownInput in;
    in.gpu = report.peak.per_gpu[busiest].gpu;
    in.peak_bytes = report.peak.used_bytes[busiest];
    if (auto i = gpu_position(report.baseline, in.gpu)) {
      in.baseline_bytes = report.baseline.used_bytes[*i];
    }
    if (auto i = gpu_position(report.post_warmup, in.gpu)) {
      in.post_warmup_bytes = report.post_warmup.used_bytes[*i];
    }
    in.num_gpu_blocks = report.server_during_load.num_gpu_blocks;
    if (!in.num_gpu_blocks) {
      in.num_gpu_blocks = metrics_in(metrics, {INT64_MIN, INT64_MAX}).num_gpu_blocks;
    }
    if (config.estimate) {
      const auto& e = *config.estimate;
      if (e.engine_report.num_gpu_blocks > 0) {
        in.kv_bytes_per_block = e.per_gpu.kv_cache_bytes / e.engine_report.num_gpu_blocks;
      }
      in.fixed_overhead_bytes =
          e.per_gpu.cuda_context_bytes + e.per_gpu.non_torch_bytes + e.per_gpu.cuda_graph_bytes;
    }
    in.kv_growth_bytes_per_usage = fit_kv_growth(memory, metrics, in.gpu, load);
    in.peak_kv_cache_usage = report.server_during_load.peak_kv_cache_usage;
    in.post_warmup_kv_cache_usage = metrics_in(metrics, post_warmup).mean_kv_cache_usage;
    report.breakdown = measure_breakdown(in);
  }
  if (config.estimate) {
    MetricsWindowStats server = report.server_during_load;
    if (!server.num_gpu_blocks) server = metrics_in(metrics, {INT64_MIN, INT64_MAX});
    report.comparison = compare_with_estimate(report.breakdown.value_or(MeasuredBreakdown{}),
                                              server, *config.estimate);
    add_server_rows(report.server, report.model, *config.estimate, report.comparison);
    report.estimate_diagnosis = diagnose_comparison(report, *config.estimate);
  }
}

Expected<void> write_failed_launch(const std::filesystem::path& dir, const ProfileReport& report,
                                   LaunchReport launch, StartupWatcher& watcher,
                                   const Timeline& timeline, const Error& error) {
  const bool interrupted = error.kind == ErrorKind::interrupted;
  launch.marks = watcher.marks();
  nlohmann::json summary = {
      {"schema_version", 1},
      {"run_id", report.run_id},
      {"status", interrupted ? "interrupted" : "launch_failed"},
      {"interrupted", interrupted},
      {"error", error.message},
      {"memory_source", report.memory_source},
      {"gpus", nlohmann::json::array()},
      {"launch", launch_json(launch, timeline.memory())},
      {"engine_reported", engine_reported_json(watcher.finish(), "server.log")},
      {"files", {{"server_log", "server.log"}, {"gpu_mem_trace", "gpu_mem_trace.csv"}}}};
  for (const auto& g : report.gpus) {
    summary["gpus"].push_back(
        {{"index", g.index}, {"name", g.name.value_or("")}, {"uuid", g.uuid.value_or("")}});
  }
  if (report.files.contains("host_mem_trace")) {
    summary["files"]["host_mem_trace"] = "host_mem_trace.csv";
  }
  return write_json_file(dir / "summary.json", summary);
}

}  // namespace kvprof::profile
