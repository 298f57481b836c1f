// The profile orchestrator (see profiler.hpp).
#include "kvprof/profile/profiler.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <thread>

#include "kvprof/client/raw_request.hpp"
#include "kvprof/client/trace_writer.hpp"
#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/gpu/sampler.hpp"
#include "kvprof/metrics/scraper.hpp"
#include "kvprof/profile/condition_metrics.hpp"
#include "kvprof/profile/endpoint_check.hpp"
#include "kvprof/profile/grid_progress.hpp"
#include "kvprof/profile/launch_plan.hpp"
#include "kvprof/profile/launcher.hpp"
#include "kvprof/profile/manifest.hpp"
#include "kvprof/profile/run_steps.hpp"
#include "kvprof/profile/server_probe.hpp"
#include "kvprof/profile/startup.hpp"
#include "kvprof/sys/proc.hpp"
#include "kvprof/util/clock.hpp"
#include "kvprof/util/redact.hpp"
#include "kvprof/util/time_text.hpp"
#include "kvprof/util/units.hpp"
#include "kvprof/workload/workload_io.hpp"

namespace kvprof::profile {

namespace fs = std::filesystem;

std::string make_run_id(const std::string& tag, double unix_s) {
  std::string id = utc_time_text(unix_s, "%Y%m%d_%H%M%S");
  std::string clean;
  for (char c : tag.substr(0, 64)) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    clean += ok ? c : '_';
  }
  if (!clean.empty()) id += "_" + clean;
  return id;
}

namespace {

// Sleeps `seconds` in small steps; returns early (true) when `stop` says so.
bool idle_wait(double seconds, const std::function<bool()>& stop) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (stop()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return stop();
}

// Thread-safe warning list that also reports each warning as progress.
class Warnings {
 public:
  explicit Warnings(const ProfileDeps& deps) : m_deps(deps) {}
  void add(const std::string& w) {
    std::lock_guard lock(m_mutex);
    if (m_list.size() < 100) m_list.push_back(w);
    if (m_deps.on_progress) m_deps.on_progress("warning: " + w);
  }
  std::vector<std::string> list() const {
    std::lock_guard lock(m_mutex);
    return m_list;
  }

 private:
  const ProfileDeps& m_deps;
  mutable std::mutex m_mutex;
  std::vector<std::string> m_list;
};

}  // namespace

namespace {

// What a run holds while its phases run.
struct Run {
  Run(const ProfileConfig& config_in, const ProfileDeps& deps_in)
      : config(config_in), deps(deps_in), warnings(deps_in) {}

  ProfileConfig config;  // the caller's, with the scrape interval and model settled
  const ProfileDeps& deps;
  Warnings warnings;
  ProfileReport report;
  Timeline timeline;
  std::vector<workload::RequestSpec> requests;
  std::optional<fs::path> dir;
  std::unique_ptr<gpu::Sampler> sampler;
  StartupWatcher watcher;
  LaunchReport launch;
  std::string driver_version, cuda_version;
  std::optional<Expected<enginelog::EngineLogReport>> server_log_read;  // --server-log, read once
  std::unique_ptr<LaunchedServer> launched;  // declared last: stopped first

  // --server-log's figures (or why it could not be read), read the first time they are asked.
  const Expected<enginelog::EngineLogReport>& server_log() {
    if (!server_log_read) {
      server_log_read =
          enginelog::parse_engine_log_file(config.server_log, engines::log_parse_options());
    }
    return *server_log_read;
  }

  void progress(const std::string& line) const {
    if (deps.on_progress) deps.on_progress(line);
  }
  [[nodiscard]] bool stopped() const { return deps.should_stop && deps.should_stop(); }
  std::unique_ptr<client::Transport> make_transport() const {
    return deps.make_transport ? deps.make_transport() : client::make_run_transport(config.run);
  }
  Expected<void> write_manifest(const std::string& status) const {
    return write_json_file(*dir / "manifest.json",
                           manifest_json(config, report, status, driver_version, cuda_version));
  }
  // The grid's requests, less those of the conditions measured before.
  Expected<void> make_requests() {
    auto made = workload::generate(config.grid);
    if (!made) return std::unexpected(made.error());
    std::erase_if(*made, [&](const workload::RequestSpec& r) {
      return config.skip_conditions.contains(r.condition_id);
    });
    if (made->empty()) {
      return fail(ErrorKind::usage,
                  "every condition of the grid was measured before: nothing is left to run");
    }
    requests = std::move(*made);
    return {};
  }
};

// The idle and warmup windows before the grid, and the grid's.
struct Windows {
  Window baseline, post_warmup, load;
  std::vector<Window> conditions;  // of the grid's conditions, in run order
};

// --launch: starts the server in its run folder, sampled from its first moment, and waits until
// it answers; a server that never does leaves its startup timeline in summary.json.
Expected<void> start_launched(Run& run) {
  const auto& ls = *run.config.launch;
  if (port_in_use(ls.host, ls.port)) {
    std::string owner;
    if (auto pid = sys::find_listening_pid(ls.port)) owner = fmt::format(" (by pid {})", *pid);
    return fail(ErrorKind::network,
                fmt::format("port {} on {} is already in use{}: the launched server could not "
                            "listen there; nothing was started",
                            ls.port, ls.host, owner));
  }
  auto made = create_run_dir(run.config.output_dir, run.report.run_id);
  if (!made) return std::unexpected(made.error());
  run.dir = *made;
  auto started = LaunchedServer::start(ls.command, *run.dir / "server.log",
                                       [&run](const LogLine& l) { run.watcher.on_line(l); });
  if (!started) return std::unexpected(started.error());
  run.launched = std::move(*started);
  run.launch.command = ls.command;
  run.launch.pid = run.launched->pid();
  run.launch.port = ls.port;
  run.launch.launched_ns = run.launched->started_ns();
  auto sampling =
      start_sampler(run.config, run.deps, *run.dir, run.launched->pid(), run.timeline, run.report);
  if (!sampling) return std::unexpected(sampling.error());
  run.sampler = std::move(*sampling);
  run.progress(fmt::format("launched (pid {}): {}; log -> {}", run.launched->pid(),
                           redact_secrets(ls.command), (*run.dir / "server.log").string()));
  std::vector<std::string> headers;
  if (!run.config.run.api_key.empty())
    headers.push_back("Authorization: Bearer " + run.config.run.api_key);
  auto ready = run.launched->wait_ready(server_root(run.config.run.endpoint), headers,
                                        ls.ready_timeout_s, [&run] { return run.stopped(); });
  if (!ready) {
    run.launch.stop = run.launched->stop(ls.grace_s);
    if (run.sampler) (void)run.sampler->stop();
    // Keep what was measured: the startup timeline so far, beside server.log and the traces.
    run.report.memory_source = run.deps.memory ? run.deps.memory_source : "none";
    if (auto ok = write_failed_launch(*run.dir, run.report, run.launch, run.watcher, run.timeline,
                                      ready.error());
        !ok) {
      return std::unexpected(ready.error());
    }
    return std::unexpected(
        Error{ready.error().kind, fmt::format("{} (startup timeline in {})", ready.error().message,
                                              (*run.dir / "summary.json").string())});
  }
  run.watcher.set_ready(monotonic_now_ns());
  run.launch.ready_s = *ready;
  run.progress(fmt::format("server ready after {:.1f} s", *ready));
  return {};
}

// Probes the server (a clear error within seconds when it is down), settles the model and the
// prompts it takes, and writes the run folder's workload and first manifest.
Expected<void> probe_and_prepare(Run& run) {
  ProfileConfig& config = run.config;
  auto server = probe_server(config.run.endpoint, config.run.api_key);
  if (!server) return std::unexpected(server.error());
  if (config.run.model.empty()) {
    if (server->models.empty()) {
      if (server->models_status == 200) {
        return fail(ErrorKind::usage, "the server lists no model; pass --model");
      }
      return fail(ErrorKind::network,
                  fmt::format("GET {}/v1/models answered {}: check the path of --endpoint, or "
                              "pass --model",
                              server_root(config.run.endpoint), server->models_status));
    }
    config.run.model = server->models.front();
  }
  // Token-ID prompts within the vocabulary the server states (llama-server's meta.n_vocab).
  if (const auto v = server->vocab_tokens.find(config.run.model);
      v != server->vocab_tokens.end() && v->second >= 64 &&
      config.grid.prompt_format == workload::PromptFormat::tokens &&
      config.grid.token_id_max > v->second) {
    config.grid.token_id_max = static_cast<uint32_t>(v->second);
    config.grid.token_id_min =
        std::min<uint32_t>(config.grid.token_id_min, config.grid.token_id_max / 4);
    if (auto ok = run.make_requests(); !ok) return ok;
  }
  if (auto ok = client::validate(config.run, run.requests); !ok) return ok;
  auto check = check_endpoint(config.run, *server, config.grid);
  if (!check) return std::unexpected(check.error());
  if (!check->unlisted_model_note.empty()) run.warnings.add(check->unlisted_model_note);
  if (check->use_text_prompts) {
    config.grid.prompt_format = workload::PromptFormat::text;
    if (auto ok = run.make_requests(); !ok) return ok;
    run.warnings.add(fmt::format(
        "the server refuses token-ID prompts (400: {}); the grid runs with text prompts, {}",
        check->token_prompt_refusal, check_text_token_counts(config.run, run.requests)));
  }

  // A llama.cpp server and no plan given: the plan of what its /props states, as a --launch is
  // planned from its command.
  if (!config.estimate && server->props) {
    auto plan = plan_from_props(*server->props, config.grid, run.deps.memory,
                                config.gpus.empty() ? 0 : config.gpus.front());
    if (plan) {
      config.estimate = std::move(plan->estimate);
      config.estimate_flags = std::move(plan->flags);
      config.estimate_assumptions = std::move(plan->assumptions);
      for (const auto& note : plan->notes)
        run.warnings.add("the plan: " + note);
      run.progress("plan: " + config.estimate_flags);
    } else {
      run.progress(
          fmt::format("no plan to compare with: {} (give --estimate-with)", plan.error().message));
    }
  }

  ProfileReport& report = run.report;
  report.endpoint = config.run.endpoint;
  report.model = config.run.model;
  report.server = *server;
  report.simulated = !config.simulation.empty() || server->simulated;
  report.memory_source = run.deps.memory ? run.deps.memory_source : "none";
  report.estimate_flags = config.estimate_flags;
  report.simulation_details = config.simulation_details;
  report.estimate_assumptions = config.estimate_assumptions;
  if (!run.dir) {
    auto made = create_run_dir(config.output_dir, report.run_id);
    if (!made) return std::unexpected(made.error());
    run.dir = *made;
  }
  report.run_dir = run.dir->string();
  report.n_planned_requests = run.requests.size();
  report.files.insert({{"workload", "workload.jsonl"},
                       {"workload_generator", "workload.generator.json"},
                       {"request_trace", "request_trace.csv"},
                       {"gpu_mem_trace", "gpu_mem_trace.csv"},
                       {"metrics_trace", "metrics_trace.csv"},
                       {"summary", "summary.json"},
                       {"manifest", "manifest.json"}});
  if (run.launched) report.files["server_log"] = "server.log";
  run.progress(fmt::format("run {}: {} requests in {} conditions against {} ({}) -> {}",
                           report.run_id, run.requests.size(),
                           workload::conditions_of(run.requests).size(),
                           redact_secrets(config.run.endpoint), config.run.model, report.run_dir));
  if (auto ok = workload::write_generated_workload(*run.dir / "workload.jsonl", config.grid,
                                                   run.requests);
      !ok) {
    return ok;
  }
  if (run.deps.memory) {
    const auto d = run.deps.memory->driver_info();
    run.driver_version = d.driver_version.value_or("");
    if (d.cuda_driver_version) run.cuda_version = gpu::format_cuda_version(*d.cuda_driver_version);
  }
  return run.write_manifest("running");
}

// Whether the server's llama.cpp slots share one KV cache (-kvu), so that each slot's n_ctx in
// /slots is the whole cache: its startup log says so (launched, or --server-log), or kvprof
// serve's /props states all the cells and each of several slots has them all.
bool slots_share_one_cache(Run& run) {
  if (run.launched) return run.watcher.kv_unified();
  if (!run.config.server_log.empty()) {
    const auto& log = run.server_log();
    return log && log->settings.kv_unified && log->settings.kv_unified->value == "true";
  }
  const auto& props = run.report.server.props;
  return props && props->total_slots.value_or(1) > 1 && props->context_tokens &&
         props->slot_context_tokens == props->context_tokens;
}

// The GPU/host sampler (already running for a launch) and the /metrics scraper, on one clock.
Expected<std::unique_ptr<metrics::MetricsScraper>> start_watching(Run& run) {
  if (!run.launched) {
    auto sampling =
        start_sampler(run.config, run.deps, *run.dir, std::nullopt, run.timeline, run.report);
    if (!sampling) return std::unexpected(sampling.error());
    run.sampler = std::move(*sampling);
  }
  if (!run.deps.memory) {
    run.warnings.add("GPU memory not sampled: " + (run.deps.memory_note.empty()
                                                       ? std::string("no memory source")
                                                       : run.deps.memory_note));
  }
  metrics::ScraperOptions mo;
  auto metrics_url = metrics::metrics_url_from_base(run.config.run.endpoint);
  if (!metrics_url) return std::unexpected(metrics_url.error());
  mo.metrics_url = *metrics_url;
  mo.read_snapshot = &engines::read_metrics;
  mo.interval_ms = run.config.metrics_interval_ms;
  mo.slots_share_one_cache = slots_share_one_cache(run);
  mo.csv_path = *run.dir / "metrics_trace.csv";
  mo.on_record = [&run](const metrics::ScrapeRecord& r) { run.timeline.add_metrics(r); };
  mo.on_warning = [&run](const std::string& w) { run.warnings.add(w); };
  return metrics::MetricsScraper::start(mo);
}

// The baseline window, the warmup requests (all failing ends the run with the reason) and the
// post-warmup window.
Expected<void> idle_and_warmup(Run& run, metrics::MetricsScraper& scraper, Windows& windows) {
  const auto stop = [&run] { return run.stopped(); };
  const ProfileConfig& config = run.config;
  const int64_t t_begin = monotonic_now_ns();
  run.progress(fmt::format("baseline: {:.1f} s without load", config.baseline_s));
  idle_wait(config.baseline_s, stop);
  windows.baseline = {t_begin, monotonic_now_ns()};
  if (!run.stopped() && config.warmup_requests > 0) {
    workload::GridOptions wg;
    wg.input_lens = {std::min<uint32_t>(128, config.grid.input_lens.front())};
    wg.output_lens = {8};
    wg.concurrencies = {1};
    wg.prefix_modes = {workload::PrefixMode::low};
    wg.n_per_condition = config.warmup_requests;
    wg.count_mode = workload::CountMode::exact;
    wg.prompt_format = config.grid.prompt_format;
    wg.token_id_min = config.grid.token_id_min;
    wg.token_id_max = config.grid.token_id_max;
    wg.seed = config.grid.seed + 1;
    auto warm = workload::generate(wg);
    if (!warm) return std::unexpected(warm.error());
    run.progress(fmt::format("warmup: {} requests", warm->size()));
    client::RequestRunner warm_runner(config.run, run.make_transport());
    std::string first_error;
    warm_runner.set_on_record([&first_error](const client::RequestRecord& r) -> Expected<void> {
      if (first_error.empty() && r.status == client::RequestStatus::error)
        first_error = r.error_text;
      return {};
    });
    auto warm_result = warm_runner.run(*warm, stop);
    const uint64_t warm_ok =
        warm_result && !warm_result->conditions.empty() ? warm_result->conditions.front().n_ok : 0;
    if (warm_result && !warm_result->stopped && warm_ok == 0) {
      // A server that fails every warmup request would fail the grid too: stop with the reason.
      scraper.stop();
      if (run.sampler) (void)run.sampler->stop();
      (void)run.write_manifest("failed");
      return fail(
          ErrorKind::network,
          fmt::format("every warmup request failed ({} of {}), the grid was not run: {}",
                      warm->size(), warm->size(), first_error.empty() ? "no answer" : first_error));
    }
    if (warm_result && warm_ok < warm->size()) {
      run.warnings.add(
          fmt::format("{} of {} warmup requests failed", warm->size() - warm_ok, warm->size()));
    }
  }
  const int64_t t_post_warmup = monotonic_now_ns();
  idle_wait(config.post_warmup_s, stop);
  windows.post_warmup = {t_post_warmup, monotonic_now_ns()};
  return {};
}

// The grid, condition by condition, into request_trace.csv; a trace that can no longer be
// written (a full disk) ends it like a stop request.
Expected<client::RunResult> run_grid(Run& run, metrics::MetricsScraper& scraper,
                                     ConditionTracker& tracker, Windows& windows) {
  const ProfileDeps& deps = run.deps;
  client::RunOptions grid_run = run.config.run;
  grid_run.min_condition_s = run.config.min_condition_s;
  client::RequestRunner runner(grid_run, run.make_transport());
  auto trace = client::TraceWriter::open(*run.dir / "request_trace.csv", runner.start_clock());
  if (!trace) return std::unexpected(trace.error());
  runner.set_on_record([&trace, &deps, &tracker](const client::RequestRecord& r) {
    tracker.add(r);
    if (deps.on_request) deps.on_request(r);
    return trace->write(r);
  });
  auto& conditions = windows.conditions;
  GridProgress grid_progress(run.requests.size(), monotonic_now_ns());
  runner.set_progress([&](const client::Progress& p) {
    grid_progress.update(p, monotonic_now_ns());
    if (deps.on_status) deps.on_status(grid_progress.status_text(p));
    if (p.done == 0 && !p.condition_done) {
      // A scrape just before it starts: the state it starts from. Outside the condition's window,
      // since a gauge can still show the previous condition's requests (vLLM updates it per step).
      tracker.begin();
      conditions.push_back({monotonic_now_ns(), 0});
      return;
    }
    if (!GridProgress::condition_ended(p) || conditions.empty()) return;
    tracker.end();  // a scrape as it ends: the progress line shows this condition's figures
    conditions.back().end_ns = monotonic_now_ns();
    const double seconds =
        static_cast<double>(conditions.back().end_ns - conditions.back().begin_ns) / 1e9;
    if (deps.on_condition_end && !p.stopped) deps.on_condition_end(p.condition_id, seconds);
    std::string mem = "-";
    if (run.sampler != nullptr && deps.memory) {
      uint64_t used = 0;
      for (const auto& g : run.sampler->gpu_peaks()) {
        if (g.latest && g.latest->memory.used_bytes) used += *g.latest->memory.used_bytes;
      }
      mem = format_bytes(used);
    }
    run.progress(grid_progress.end_text(p, seconds, mem, tracker.progress_text(conditions.back())));
  });
  const auto write_failed = [&] {
    return (run.sampler && run.sampler->failed()) || scraper.write_error().has_value();
  };
  const int64_t t_load = monotonic_now_ns();
  auto result = runner.run(run.requests, [&] { return run.stopped() || write_failed(); });
  const int64_t t_load_end = monotonic_now_ns();
  for (auto& w : conditions) {
    if (w.end_ns == 0) w.end_ns = t_load_end;
  }
  // One more scrape and sample so the end of the load is in the traces.
  const uint64_t scrapes = scraper.stats().n_scrapes;
  scraper.wait_for_scrapes(scrapes + 1, run.config.metrics_interval_ms * 2 + 500);
  windows.load = {t_load, monotonic_now_ns()};
  return result;
}

// Stops the scraper, the launched server (watching its memory come back) and the sampler, then
// fills the sampler's holes from the source's history. Returns a trace that could not be
// written, if any.
std::optional<Error> stop_watching(Run& run, metrics::MetricsScraper& scraper) {
  scraper.stop();
  std::optional<Error> trace_error = scraper.write_error();
  if (run.launched) {
    run.progress("stopping the launched server");
    stop_launched(*run.config.launch, *run.launched, run.timeline, run.deps.memory != nullptr,
                  run.launch);
    if (!run.launch.stop.group_gone) {
      run.warnings.add(
          fmt::format("processes of the launched server's group {} were still there after SIGKILL",
                      run.launch.pid));
    }
    if (run.launch.memory_released == false) {
      run.warnings.add(fmt::format(
          "GPU memory did not come back within {:.0f} s of stopping the launched server",
          run.config.launch->release_wait_s));
    }
  }
  if (run.sampler) {
    if (auto ok = run.sampler->stop(); !ok) trace_error = ok.error();
    if (run.deps.memory && !trace_error) {
      if (auto w = fill_memory_gaps(*run.deps.memory, *run.sampler, run.config.gpu_interval_ms,
                                    *run.dir, run.timeline, run.report)) {
        run.warnings.add(*w);
      }
    }
  }
  if (trace_error) run.warnings.add(trace_error->message);
  return trace_error;
}

// The engine's own figures: from the launched server's log (or /props when it logged none),
// --server-log, or the server's /props.
void read_engine_figures(Run& run) {
  ProfileReport& report = run.report;
  if (run.launched) {
    report.engine_reported = engine_reported_json(run.watcher.finish(), "server.log");
    // A server that logged no buffers (a quiet llama.cpp) may state them in /props.
    if (report.engine_reported["components"].empty() && report.server.props &&
        report.server.props->buffers)
      report.engine_reported = engine_reported_json(*report.server.props->buffers, "/props");
  } else if (!run.config.server_log.empty()) {
    if (const auto& log = run.server_log()) {
      report.engine_reported = engine_reported_json(*log, run.config.server_log.string());
    } else {
      run.warnings.add("--server-log: " + log.error().message);
    }
  } else if (report.server.props && report.server.props->buffers) {
    report.engine_reported = engine_reported_json(*report.server.props->buffers, "/props");
  } else if (report.server.props) {
    run.warnings.add(
        "this llama.cpp server states no buffer sizes in /props: give --server-log with its "
        "startup log, or start it with --launch, for the engine's own figures");
  }
}

// The analysis of what was measured: capture points, per-condition memory and server figures,
// the derived answers, the breakdown and the comparison with the plan.
void analyse(Run& run, const client::RunResult* result, const Windows& windows,
             const metrics::MetricsScraper& scraper, ConditionTracker& tracker) {
  ProfileReport& report = run.report;
  const auto memory = run.timeline.memory();
  const auto host_points = run.timeline.host();
  const auto scraped = run.timeline.metrics();
  report.baseline = capture_point("baseline", memory, windows.baseline, false);
  report.post_warmup = capture_point("post_warmup", memory, windows.post_warmup, false);
  report.peak = capture_point("peak", memory, windows.load, true);
  for (const auto& [name, window] :
       {std::pair{"baseline", windows.baseline}, std::pair{"post_warmup", windows.post_warmup},
        std::pair{"peak", windows.load}}) {
    if (const auto p = peak_rss_point(host_points, window))
      report.host_captures.emplace_back(name, *p);
  }
  report.server_during_load = metrics_in(scraped, windows.load);
  if (!scraped.empty()) {
    report.engine_type = std::string(engines::engine_name(scraped.back().snapshot.engine));
  }
  if (result) {
    report.interrupted = result->stopped;
    report.max_in_flight = result->max_in_flight;
    report.transport = result->transport;
    for (size_t i = 0; i < result->conditions.size(); ++i) {
      const Window w = i < windows.conditions.size() ? windows.conditions[i] : windows.load;
      report.conditions.push_back({result->conditions[i],
                                   w,
                                   memory_in(memory, w),
                                   metrics_in(scraped, w),
                                   {},
                                   peak_rss_in(host_points, w)});
    }
  }
  report.derived = derive_answers(condition_facts(run.requests, report.conditions, scraped),
                                  kv_peak_in(scraped, windows.load));
  analyse_memory(run.config, memory, scraped, windows.load, windows.post_warmup, report);
  if (run.sampler) {
    report.host = run.sampler->host_peak();
    report.sampler = run.sampler->stats();
  }
  report.scraper = scraper.stats();
  if (auto w = assess_conditions(tracker.kv(), run.deps.memory != nullptr, report)) {
    run.warnings.add(*w);
  }
  if (run.launched) {
    run.launch.marks = run.watcher.marks();
    report.launch = launch_json(run.launch, memory);
  }
  read_engine_figures(run);
  // A server on the CPU: its peak RSS into the buffers the engine states.
  if (!report.breakdown && report.peak.empty() && report.host) {
    report.breakdown = host_breakdown(report.engine_reported, report.host->peak_rss_bytes);
  }
  if (!report.comparison.empty() && report.baseline.empty() && run.config.estimate) {
    // The buffers the plan says the engine will log, read as its log is.
    const auto& est = *run.config.estimate;
    std::string plan_log;
    for (const auto& line : est.engine_report.log_lines)
      plan_log += line + "\n";
    const auto planned = engine_reported_json(
        enginelog::parse_engine_log(plan_log, engines::log_parse_options(est.settings.engine)),
        "plan");
    compare_with_engine_figures(report.comparison, report.engine_reported, planned,
                                report.host ? report.host->peak_rss_bytes : std::nullopt);
  }
}

// summary.json and the final manifest; the outcome, or the run's first error.
Expected<ProfileOutcome> finish(Run& run, Expected<client::RunResult>& result,
                                const std::optional<Error>& trace_error) {
  ProfileReport& report = run.report;
  report.ended_unix_s = unix_now_s();
  for (const auto& w : run.warnings.list())
    report.warnings.push_back(w);
  ProfileOutcome out;
  out.run_dir = *run.dir;
  out.interrupted = (report.interrupted || run.stopped()) && !trace_error;
  report.interrupted = out.interrupted;
  out.summary = summary_json(report);
  out.text = summary_text(report);
  out.totals = request_totals(report);
  const auto summary_ok = write_json_file(*run.dir / "summary.json", out.summary);
  const auto manifest_ok = run.write_manifest(!result || trace_error ? "failed"
                                              : out.interrupted      ? "interrupted"
                                                                     : "completed");
  if (!result) return std::unexpected(result.error());
  if (trace_error) return std::unexpected(*trace_error);
  if (!summary_ok) return std::unexpected(summary_ok.error());
  if (!manifest_ok) return std::unexpected(manifest_ok.error());
  out.report = std::move(report);
  return out;
}

}  // namespace

Expected<ProfileOutcome> run_profile(const ProfileConfig& config, const ProfileDeps& deps) {
  Run run(config, deps);
  run.report.scrape_plan = scrape_plan_for(config.metrics_interval_ms, config.min_condition_s);
  run.config.metrics_interval_ms = run.report.scrape_plan.interval_ms;
  if (auto ok = run.make_requests(); !ok) return std::unexpected(ok.error());
  run.report.started_unix_s = unix_now_s();
  run.report.run_id = make_run_id(config.run_tag, run.report.started_unix_s);

  if (config.launch) {
    if (auto ok = start_launched(run); !ok) return std::unexpected(ok.error());
  }
  if (auto ok = probe_and_prepare(run); !ok) return std::unexpected(ok.error());
  auto scraper = start_watching(run);
  if (!scraper) return std::unexpected(scraper.error());
  ConditionTracker tracker(**scraper, run.timeline, run.requests,
                           (*scraper)->scrape_timeout_ms() + 500);
  Windows windows;
  if (auto ok = idle_and_warmup(run, **scraper, windows); !ok) return std::unexpected(ok.error());
  auto result = run_grid(run, **scraper, tracker, windows);
  const auto trace_error = stop_watching(run, **scraper);
  analyse(run, result ? &*result : nullptr, windows, **scraper, tracker);
  return finish(run, result, trace_error);
}

}  // namespace kvprof::profile
