// run_bench: the worker child, the memory sampler and the event loop that joins them.
#include "kvprof/bench/bench_run.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "kvprof/bench/bench_compare.hpp"
#include "kvprof/bench/bench_summary.hpp"
#include "kvprof/bench/worker.hpp"
#include "kvprof/client/transport.hpp"
#include "kvprof/gpu/sampler.hpp"
#include "kvprof/profile/manifest.hpp"
#include "kvprof/profile/profiler.hpp"
#include "kvprof/sys/proc.hpp"
#include "kvprof/sys/signals.hpp"

namespace kvprof::bench {
namespace fs = std::filesystem;
using nlohmann::json;
namespace {

constexpr size_t k_max_event_bytes = 4 << 20;        // one event line
constexpr int64_t k_stop_grace_ns = 10'000'000'000;  // after Ctrl-C, before SIGKILL

std::optional<uint64_t> opt_u64(const json& j, const char* key) {
  if (j.contains(key) && j[key].is_number_unsigned()) return j[key].get<uint64_t>();
  return std::nullopt;
}

// Folds one worker event into the report.
void apply_event(const json& e, BenchReport& r, std::optional<size_t>& current) {
  const std::string ev = e.value("ev", "");
  const int64_t t = e.value("t_mono_ns", int64_t{0});
  if (ev == "phase") {
    r.phases.push_back({e.value("name", ""), opt_u64(e, "rss_bytes"), opt_u64(e, "pss_bytes"), t});
  } else if (ev == "lib") {
    r.lib = e;
  } else if (ev == "model") {
    r.model = e;
  } else if (ev == "context") {
    r.context = e;
    r.breakdown = e.value("breakdown", json::array());
  } else if (ev == "memory_breakdown") {
    r.breakdown = e.value("breakdown", json::array());
  } else if (ev == "condition_start") {
    const auto index = e.value("index", size_t{0});
    if (index < r.conditions.size()) {
      r.conditions[index].started = true;
      r.conditions[index].start_mono_ns = t;
      r.conditions[index].n_ctx = e.value("n_ctx", 0U);
      r.conditions[index].n_seq_max = e.value("n_seq_max", 0U);
      r.conditions[index].breakdown = e.value("breakdown", json::array());
      r.conditions[index].start_rss_bytes = opt_u64(e, "rss_bytes");
      current = index;
    }
  } else if (ev == "request") {
    const auto index = e.value("condition", size_t{0});
    if (index < r.conditions.size()) {
      r.conditions[index].requests.push_back(
          {static_cast<uint32_t>(index), e.value("seq", 0U), e.value("prompt_tokens", 0U),
           e.value("output_tokens", 0U), e.value("ttft_ms", 0.0), e.value("e2e_ms", 0.0)});
    }
  } else if (ev == "condition_end") {
    const auto index = e.value("index", size_t{0});
    if (index < r.conditions.size()) {
      auto& c = r.conditions[index];
      c.finished = !e.value("interrupted", false);
      c.wall_ms = e.value("wall_ms", 0.0);
      c.step_ms = e.value("step_ms", std::vector<double>{});
      c.llama_prompt_ms = e.value("llama_prompt_ms", 0.0);
      c.llama_eval_ms = e.value("llama_eval_ms", 0.0);
      c.end_rss_bytes = opt_u64(e, "rss_bytes");
      c.end_pss_bytes = opt_u64(e, "pss_bytes");
      c.end_mono_ns = t;
      // A condition shorter than the sampling interval still has the worker's own readings.
      for (const auto& v : {c.start_rss_bytes, c.end_rss_bytes})
        if (v) c.peak_rss_bytes = std::max(c.peak_rss_bytes.value_or(0), *v);
      if (c.end_pss_bytes)
        c.peak_pss_bytes = std::max(c.peak_pss_bytes.value_or(0), *c.end_pss_bytes);
    }
    current.reset();
  } else if (ev == "error") {
    r.status = e.value("kind", "") == "interrupted" ? "interrupted" : "failed";
    r.error = e.value("message", "");
    if (e.value("usage", false)) r.status = "refused";
  } else if (ev == "done") {
    r.status = "completed";
  }
}

// Raises the running condition's peaks with the sampler's latest readings.
void track_peaks(const gpu::Sampler& sampler, BenchReport& r, std::optional<size_t> current) {
  if (!current) return;
  auto& c = r.conditions[*current];
  if (auto host = sampler.host_peak();
      host && host->latest && host->latest_t_mono_ns >= c.start_mono_ns) {
    if (host->latest->rss_bytes)
      c.peak_rss_bytes = std::max(c.peak_rss_bytes.value_or(0), *host->latest->rss_bytes);
    if (host->latest->pss_bytes)
      c.peak_pss_bytes = std::max(c.peak_pss_bytes.value_or(0), *host->latest->pss_bytes);
  }
  uint64_t gpu_sum = 0;
  bool any = false;
  for (const auto& g : sampler.gpu_peaks()) {
    if (g.latest && g.latest->memory.used_bytes && g.latest->t_mono_ns >= c.start_mono_ns) {
      gpu_sum += *g.latest->memory.used_bytes;
      any = true;
    }
  }
  if (any) c.peak_gpu_used_bytes = std::max(c.peak_gpu_used_bytes.value_or(0), gpu_sum);
}

// Writes what the run found so far; the first failure is kept as a warning.
void write_outputs(const BenchConfig& config, BenchReport& r, const fs::path& dir) {
  for (auto&& [path, what] :
       {std::pair{dir / "request_trace.csv", 0}, std::pair{dir / "summary.json", 1},
        std::pair{dir / "manifest.json", 2}}) {
    Expected<void> ok;
    if (what == 0) ok = write_request_trace(path, r);
    if (what == 1) ok = profile::write_json_file(path, summary_json(config, r));
    if (what == 2) ok = profile::write_json_file(path, manifest_json(config, r));
    if (!ok) r.warnings.push_back(ok.error().message);
  }
}

}  // namespace

int bench_exit_code(const BenchReport& report) {
  if (report.status == "completed") return 0;
  if (report.status == "interrupted") return 130;
  if (report.status == "refused") return 2;
  return 1;
}

Expected<BenchReport> run_bench(const BenchConfig& config, gpu::MemorySource* gpu,
                                const std::string& memory_source_name,
                                const BenchEventCallback& on_event) {
  BenchReport r;
  r.started_unix_s = unix_now_s();
  r.run_id =
      profile::make_run_id(config.run_tag.empty() ? "bench" : config.run_tag, r.started_unix_s);
  auto dir = profile::create_run_dir(config.output_dir, r.run_id);
  if (!dir) return std::unexpected(dir.error());
  r.run_dir = dir->string();
  r.memory_source = gpu != nullptr ? memory_source_name : "none";
  for (const auto& c : make_conditions(config)) {
    ConditionResult result;
    result.condition = c;
    r.conditions.push_back(std::move(result));
  }
  r.files = {{"engine_log", "engine.log"},
             {"host_memory_trace", "host_mem_trace.csv"},
             {"request_trace", "request_trace.csv"},
             {"summary", "summary.json"},
             {"manifest", "manifest.json"}};
  if (gpu != nullptr) r.files["gpu_memory_trace"] = "gpu_mem_trace.csv";
  if (auto ok = profile::write_json_file(*dir / "manifest.json", manifest_json(config, r)); !ok) {
    return std::unexpected(ok.error());
  }

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return fail(ErrorKind::io, fmt::format("cannot create a pipe: {}", std::strerror(errno)));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    return fail(ErrorKind::io,
                fmt::format("cannot start the engine process: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::_exit(run_worker(config, fds[1], *dir / "engine.log"));
  }
  ::close(fds[1]);

  gpu::SamplerOptions so;
  so.host_pid = pid;
  so.host_interval_ms = 10;
  so.host_trace_path = (*dir / "host_mem_trace.csv").string();
  if (gpu != nullptr) so.gpu_trace_path = (*dir / "gpu_mem_trace.csv").string();
  gpu::Sampler sampler(gpu, so);
  if (auto ok = sampler.start(); !ok)
    r.warnings.push_back("memory sampling: " + ok.error().message);

  sys::install_stop_handlers();
  std::string buffer;
  std::optional<size_t> current;
  bool forwarded = false;
  int64_t kill_at = 0;
  char chunk[65536];
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, 10);
    track_peaks(sampler, r, current);
    if (sys::stop_requested() && !forwarded) {
      ::kill(pid, SIGINT);
      forwarded = true;
      kill_at = monotonic_now_ns() + k_stop_grace_ns;
    }
    if (forwarded && monotonic_now_ns() > kill_at) ::kill(pid, SIGKILL);
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the worker closed the pipe: it exited
    buffer.append(chunk, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = buffer.find('\n', start)) != std::string::npos; start = nl + 1) {
      auto e = json::parse(buffer.begin() + static_cast<std::ptrdiff_t>(start),
                           buffer.begin() + static_cast<std::ptrdiff_t>(nl), nullptr, false);
      if (!e.is_discarded() && e.is_object()) {
        apply_event(e, r, current);
        if (on_event) on_event(r, e);
      }
    }
    buffer.erase(0, start);
    if (buffer.size() > k_max_event_bytes) buffer.clear();
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (auto ok = sampler.stop(); !ok) r.warnings.push_back("memory sampling: " + ok.error().message);
  if (auto host = sampler.host_peak()) {
    r.peak_rss_bytes = host->peak_rss_bytes;
    r.peak_pss_bytes = host->peak_pss_bytes;
  }
  r.worker_exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (WIFSIGNALED(status) && r.status != "interrupted") {
    r.status = "crashed";
    r.error = fmt::format("the engine process died with signal {} ({})", WTERMSIG(status),
                          strsignal(WTERMSIG(status)));
  } else if (r.status == "running") {
    r.status = sys::stop_requested() ? "interrupted" : "failed";
    if (r.error.empty()) r.error = fmt::format("the engine process exited with {}", r.worker_exit);
  }
  if (sys::stop_requested() && r.status == "failed") r.status = "interrupted";
  if (r.status != "completed") {
    if (auto log = sys::read_text_file((*dir / "engine.log").string(), 8 << 20)) {
      std::vector<std::string> lines;
      size_t s = 0;
      for (size_t nl; (nl = log->find('\n', s)) != std::string::npos; s = nl + 1)
        lines.push_back(log->substr(s, nl - s));
      const size_t keep = std::min<size_t>(lines.size(), 5);
      r.last_log_lines.assign(lines.end() - static_cast<std::ptrdiff_t>(keep), lines.end());
    }
  }
  r.ended_unix_s = unix_now_s();
  r.estimate_comparison = estimate_comparison_json(config, r, r.warnings);
  write_outputs(config, r, *dir);
  return r;
}

}  // namespace kvprof::bench
