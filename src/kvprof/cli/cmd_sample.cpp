// `kvprof sample`: records GPU memory (NVML) and optionally a process's host memory into CSV
// traces until --duration passes or Ctrl-C (exit 130, traces complete up to the stop).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "kvprof/cli/commands.hpp"
#include "kvprof/gpu/nvml.hpp"
#include "kvprof/gpu/sampler.hpp"
#include "kvprof/gpu/trace_file.hpp"
#include "kvprof/scheduler/job_environment.hpp"
#include "kvprof/sys/proc.hpp"
#include "kvprof/sys/signals.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::cli {
namespace {

struct SampleOptions {
  std::string gpu_trace_path = "gpu_mem_trace.csv";
  double duration_s = 0;
  uint32_t interval_ms = 20;
  uint32_t process_interval_ms = 500;
  uint32_t host_interval_ms = 100;
  std::string gpus;
  int pid = 0;
  int port = 0;
  std::string host_trace_path;
  std::string node_dir;
  bool json = false;
};

// --node-dir: the trace goes to DIR/<node>/gpu_mem_trace.csv and, without --gpus, the GPUs the
// job holds on this node are sampled.
void place_on_node(SampleOptions& o) {
  const auto job = scheduler::current_job();
  std::string node = job ? job->node : std::string();
  if (node.empty()) {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) == 0) node = name;
  }
  if (node.empty() || node == "." || node == ".." ||
      node.find_first_of("/\n\r") != std::string::npos) {
    throw Fatal({ErrorKind::input, fmt::format("--node-dir: this node's name '{}' cannot name a "
                                               "folder",
                                               node.substr(0, 100))});
  }
  const std::filesystem::path dir = std::filesystem::path(o.node_dir) / node;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw Fatal({ErrorKind::io,
                 fmt::format("--node-dir: cannot create {}: {}", dir.string(), ec.message())});
  }
  o.gpu_trace_path = (dir / "gpu_mem_trace.csv").string();
  if (o.gpus.empty() && job && !job->gpus.empty())
    o.gpus = fmt::format("{}", fmt::join(job->gpus, ","));
}

std::vector<unsigned> parse_gpu_list(const std::string& text) {
  std::vector<unsigned> out;
  if (trim(text).empty()) return out;
  for (const std::string& field : split(text, ',')) {
    const std::string f = trim(field);
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), value);
    if (f.empty() || ec != std::errc{} || end != f.data() + f.size() || value > 1024) {
      throw Fatal(
          {ErrorKind::usage, fmt::format("--gpus: '{}' is not a GPU index list like 0,1", text)});
    }
    out.push_back(value);
  }
  return out;
}

std::string opt_bytes(const std::optional<uint64_t>& b) {
  return b ? format_bytes(*b, 2, true) : "?";
}

void run_sample(SampleOptions o) {
  sys::install_stop_handlers();  // first: Ctrl-C during start-up also ends cleanly
  if (!o.node_dir.empty()) place_on_node(o);
  std::optional<pid_t> host_pid;
  if (o.pid > 0) host_pid = o.pid;
  if (o.port > 0) {
    host_pid = value_or_fatal(sys::find_listening_pid(static_cast<uint16_t>(o.port)));
  }

  std::unique_ptr<gpu::NvmlSource> nvml;
  std::string no_gpu_reason;  // why the GPU trace holds only its header
  if (auto opened = gpu::NvmlSource::open()) {
    nvml = std::move(*opened);
  } else if (!host_pid) {
    throw Fatal(opened.error());
  } else {
    // The GPU trace is still written, with its header, so a script finds the file it asked for.
    no_gpu_reason = opened.error().message;
    value_or_fatal(gpu::TraceFile::create(o.gpu_trace_path, gpu::k_gpu_trace_header));
    std::fprintf(stderr,
                 "kvprof: note: %s; sampling host memory of pid %d only (%s holds only its "
                 "header)\n",
                 no_gpu_reason.c_str(), static_cast<int>(*host_pid), o.gpu_trace_path.c_str());
  }

  gpu::SamplerOptions so;
  so.interval_ms = o.interval_ms;
  so.process_interval_ms = o.process_interval_ms;
  so.host_interval_ms = o.host_interval_ms;
  if (nvml) {
    so.gpus = parse_gpu_list(o.gpus);
    so.gpu_trace_path = o.gpu_trace_path;
  }
  if (host_pid) {
    so.host_pid = host_pid;
    so.host_trace_path = o.host_trace_path;
    if (so.host_trace_path.empty()) {
      so.host_trace_path =
          (std::filesystem::path(o.gpu_trace_path).parent_path() / "host_mem_trace.csv").string();
    }
  }

  gpu::Sampler sampler(nvml.get(), so);
  if (auto started_ok = sampler.start(); !started_ok) throw Fatal(started_ok.error());
  const auto started = std::chrono::steady_clock::now();
  const auto deadline =
      o.duration_s > 0 ? started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(o.duration_s))
                       : std::chrono::steady_clock::time_point::max();
  while (!sys::stop_requested() && !sampler.failed() && !(!nvml && sampler.host_exited())) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    sys::wait_for_stop(
        std::min(left + std::chrono::milliseconds(1), std::chrono::milliseconds(100)));
  }
  const auto result = sampler.stop();
  const double elapsed_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!result) throw Fatal(result.error());

  const gpu::SamplerStats stats = sampler.stats();
  nlohmann::json json = {
      {"schema_version", 1},
      {"duration_s", elapsed_s},
      {"gpu_trace", o.gpu_trace_path},
      {"gpu_trace_empty_because",
       no_gpu_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(no_gpu_reason)},
      {"host_trace", host_pid ? nlohmann::json(so.host_trace_path) : nlohmann::json(nullptr)},
      {"device_rows", stats.device_rows},
      {"process_rows", stats.process_rows},
      {"host_rows", stats.host_rows},
      {"missed_ticks", stats.missed_ticks},
      {"failed_queries", stats.failed_queries},
      {"gpus", nlohmann::json::array()}};
  std::string text =
      fmt::format("sampled {:.1f} s: {} device rows, {} process rows, {} host rows\n", elapsed_s,
                  stats.device_rows, stats.process_rows, stats.host_rows);
  for (const auto& p : sampler.gpu_peaks()) {
    json["gpus"].push_back(
        {{"gpu", p.gpu},
         {"samples", p.samples},
         {"peak_used_bytes",
          p.peak_used_bytes ? nlohmann::json(*p.peak_used_bytes) : nlohmann::json(nullptr)},
         {"total_bytes", p.latest && p.latest->memory.total_bytes
                             ? nlohmann::json(*p.latest->memory.total_bytes)
                             : nlohmann::json(nullptr)}});
    text += fmt::format("GPU {}: peak used {} of {}\n", p.gpu, opt_bytes(p.peak_used_bytes),
                        p.latest ? opt_bytes(p.latest->memory.total_bytes) : "?");
  }
  if (auto h = sampler.host_peak()) {
    json["host"] = {{"pid", h->pid},
                    {"samples", h->samples},
                    {"exited", h->exited},
                    {"peak_rss_bytes", h->peak_rss_bytes ? nlohmann::json(*h->peak_rss_bytes)
                                                         : nlohmann::json(nullptr)},
                    {"peak_pss_bytes", h->peak_pss_bytes ? nlohmann::json(*h->peak_pss_bytes)
                                                         : nlohmann::json(nullptr)}};
    text +=
        fmt::format("pid {}: peak RSS {}, peak PSS {}{}\n", h->pid, opt_bytes(h->peak_rss_bytes),
                    opt_bytes(h->peak_pss_bytes), h->exited ? " (process exited)" : "");
  }
  if (stats.failed_queries > 0) {
    json["last_query_error"] = stats.last_query_error;
    text += fmt::format("warning: {} queries failed; last: {}\n", stats.failed_queries,
                        stats.last_query_error);
  }
  if (stats.missed_ticks > 0) {
    text += fmt::format("warning: {} samples skipped because queries overran the interval\n",
                        stats.missed_ticks);
  }
  const std::string body = o.json ? json_text(json, 2) + "\n" : text;
  std::fwrite(body.data(), 1, body.size(), stdout);
  std::fflush(stdout);
  if (sys::stop_requested()) {
    throw Fatal({ErrorKind::interrupted, "interrupted; the traces hold every sample taken"});
  }
}

}  // namespace

void register_sample_command(CLI::App& app) {
  auto o = std::make_shared<SampleOptions>();
  auto* cmd = app.add_subcommand(
      "sample",
      "Record GPU memory over time (NVML) into a CSV trace; optionally the host memory of a\n"
      "process. Stops after --duration or at Ctrl-C (exit 130; every sample taken is on disk).\n"
      "GPU trace columns: t_mono_ns,t_wall_ms,kind,gpu,pid,total_bytes,reserved_bytes,\n"
      "free_bytes,used_bytes (kind = device | process; empty cell = not available).\n"
      "Host trace columns: t_mono_ns,t_wall_ms,pid,rss_bytes,pss_bytes.");
  auto* output = cmd->add_option("-o,--output", o->gpu_trace_path, "GPU trace CSV to write")
                     ->type_name("FILE")
                     ->capture_default_str();
  cmd->add_option("--node-dir", o->node_dir,
                  "Write the GPU trace to DIR/<node>/gpu_mem_trace.csv, <node> being this "
                  "node's name in its job (else the host name), sampling the GPUs the job holds "
                  "here unless --gpus says others. A multi-node sweep job runs it on every node")
      ->type_name("DIR")
      ->excludes(output);
  cmd->add_option("--duration", o->duration_s, "Seconds to sample (0 = until Ctrl-C)")
      ->check(CLI::Range(0.0, 1e7))
      ->capture_default_str();
  cmd->add_option("--interval-ms", o->interval_ms, "Device memory sampling period")
      ->check(CLI::Range(1U, 3'600'000U))
      ->capture_default_str();
  cmd->add_option("--process-interval-ms", o->process_interval_ms,
                  "Per-process GPU memory period (0 = off)")
      ->check(CLI::Range(0U, 3'600'000U))
      ->capture_default_str();
  cmd->add_option("--gpus", o->gpus, "GPU indices to sample, e.g. 0,1 (default: all)")
      ->type_name("LIST");
  auto* pid = cmd->add_option("--pid", o->pid, "Also sample this process's host memory (RSS, PSS)")
                  ->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--port", o->port, "Like --pid, for the process listening on this TCP port")
      ->check(CLI::Range(1, 65535))
      ->excludes(pid);
  cmd->add_option("--host-trace", o->host_trace_path,
                  "Host trace CSV (default: host_mem_trace.csv beside the GPU trace)")
      ->type_name("FILE");
  cmd->add_option("--host-interval-ms", o->host_interval_ms, "Host memory sampling period")
      ->check(CLI::Range(1U, 3'600'000U))
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print the summary as JSON");
  cmd->callback([o] { run_sample(*o); });
}

}  // namespace kvprof::cli
