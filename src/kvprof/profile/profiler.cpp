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
#include "kvprof/profile/launcher.hpp"
#include "kvprof/profile/manifest.hpp"
#include "kvprof/profile/run_steps.hpp"
#include "kvprof/profile/server_probe.hpp"
#include "kvprof/profile/startup.hpp"
#include "kvprof/sys/proc.hpp"
#include "kvprof/util/redact.hpp"
#include "kvprof/util/units.hpp"
#include "kvprof/workload/workload_io.hpp"

namespace kvprof::profile {

namespace fs = std::filesystem;

std::string make_run_id(const std::string& tag, double unix_s) {
  const auto t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d_%H%M%S", &tm);
  std::string id = buf;
  std::string clean;
  for (char c : tag.substr(0, 64)) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    clean += ok ? c : '_';
  }
  if (!clean.empty()) id += "_" + clean;
  return id;
}

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double now_unix_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

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

Expected<ProfileOutcome> run_profile(const ProfileConfig& config_in, const ProfileDeps& deps) {
  ProfileConfig config = config_in;
  const ScrapePlan scrape_plan =
      scrape_plan_for(config.metrics_interval_ms, config.min_condition_s);
  config.metrics_interval_ms = scrape_plan.interval_ms;
  const auto progress = [&](const std::string& line) {
    if (deps.on_progress) deps.on_progress(line);
  };
  const auto stop = [&] { return deps.should_stop && deps.should_stop(); };
  // The grid's requests, less those of the conditions measured before.
  const auto make_requests = [&]() -> Expected<std::vector<workload::RequestSpec>> {
    auto made = workload::generate(config.grid);
    if (!made || config.skip_conditions.empty()) return made;
    std::erase_if(*made, [&](const workload::RequestSpec& r) {
      return config.skip_conditions.contains(r.condition_id);
    });
    if (made->empty()) {
      return fail(ErrorKind::usage,
                  "every condition of the grid was measured before: nothing "
                  "is left to run");
    }
    return made;
  };
  auto requests = make_requests();
  if (!requests) return std::unexpected(requests.error());
  ProfileReport report;
  report.started_unix_s = now_unix_s();
  report.run_id = make_run_id(config.run_tag, report.started_unix_s);
  report.scrape_plan = scrape_plan;

  // A launched server: started before the probe, sampled from its first moment.
  Timeline timeline;
  std::optional<fs::path> dir;
  std::unique_ptr<gpu::Sampler> sampler;
  StartupWatcher watcher;
  LaunchReport launch;
  std::unique_ptr<LaunchedServer> launched;  // declared last: stopped first
  if (config.launch) {
    const auto& ls = *config.launch;
    if (port_in_use(ls.host, ls.port)) {
      std::string owner;
      if (auto pid = sys::find_listening_pid(ls.port)) owner = fmt::format(" (by pid {})", *pid);
      return fail(ErrorKind::network,
                  fmt::format("port {} on {} is already in use{}: the launched server could not "
                              "listen there; nothing was started",
                              ls.port, ls.host, owner));
    }
    auto made = create_run_dir(config.output_dir, report.run_id);
    if (!made) return std::unexpected(made.error());
    dir = *made;
    auto started = LaunchedServer::start(ls.command, *dir / "server.log",
                                         [&watcher](const LogLine& l) { watcher.on_line(l); });
    if (!started) return std::unexpected(started.error());
    launched = std::move(*started);
    launch.command = ls.command;
    launch.pid = launched->pid();
    launch.port = ls.port;
    launch.launched_ns = launched->started_ns();
    auto sampling = start_sampler(config, deps, *dir, launched->pid(), timeline, report);
    if (!sampling) return std::unexpected(sampling.error());
    sampler = std::move(*sampling);
    progress(fmt::format("launched (pid {}): {}; log -> {}", launched->pid(),
                         redact_secrets(ls.command), (*dir / "server.log").string()));
    std::vector<std::string> headers;
    if (!config.run.api_key.empty())
      headers.push_back("Authorization: Bearer " + config.run.api_key);
    auto ready =
        launched->wait_ready(server_root(config.run.endpoint), headers, ls.ready_timeout_s, stop);
    if (!ready) {
      launch.stop = launched->stop(ls.grace_s);
      if (sampler) (void)sampler->stop();
      // Keep what was measured: the startup timeline so far, beside server.log and the traces.
      report.memory_source = deps.memory ? deps.memory_source : "none";
      if (auto ok = write_failed_launch(*dir, report, launch, watcher, timeline, ready.error());
          !ok) {
        return std::unexpected(ready.error());
      }
      return std::unexpected(Error{ready.error().kind,
                                   fmt::format("{} (startup timeline in {})", ready.error().message,
                                               (*dir / "summary.json").string())});
    }
    watcher.set_ready(now_ns());
    launch.ready_s = *ready;
    progress(fmt::format("server ready after {:.1f} s", *ready));
  }

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
    requests = make_requests();
    if (!requests) return std::unexpected(requests.error());
  }
  if (auto ok = client::validate(config.run, *requests); !ok) return std::unexpected(ok.error());
  auto check = check_endpoint(config.run, *server, config.grid);
  if (!check) return std::unexpected(check.error());
  std::string prompt_warning;
  if (check->use_text_prompts) {
    config.grid.prompt_format = workload::PromptFormat::text;
    requests = make_requests();
    if (!requests) return std::unexpected(requests.error());
    prompt_warning = fmt::format(
        "the server refuses token-ID prompts (400: {}); the grid runs with text prompts, {}",
        check->token_prompt_refusal, check_text_token_counts(config.run, *requests));
  }
  const auto make_transport = [&] {
    return deps.make_transport ? deps.make_transport() : client::make_run_transport(config.run);
  };

  report.endpoint = config.run.endpoint;
  report.model = config.run.model;
  report.server = *server;
  report.simulated = !config.simulation.empty() || server->simulated;
  report.memory_source = deps.memory ? deps.memory_source : "none";
  report.estimate_flags = config.estimate_flags;
  report.simulation_details = config.simulation_details;
  report.estimate_assumptions = config.estimate_assumptions;
  if (!dir) {
    auto made = create_run_dir(config.output_dir, report.run_id);
    if (!made) return std::unexpected(made.error());
    dir = *made;
  }
  report.run_dir = dir->string();
  report.n_planned_requests = requests->size();
  report.files.insert({{"workload", "workload.jsonl"},
                       {"request_trace", "request_trace.csv"},
                       {"gpu_mem_trace", "gpu_mem_trace.csv"},
                       {"metrics_trace", "metrics_trace.csv"},
                       {"summary", "summary.json"},
                       {"manifest", "manifest.json"}});
  if (launched) report.files["server_log"] = "server.log";
  Warnings warnings(deps);
  if (!prompt_warning.empty()) warnings.add(prompt_warning);
  const auto conditions = workload::conditions_of(*requests);
  progress(fmt::format("run {}: {} requests in {} conditions against {} ({}) -> {}", report.run_id,
                       requests->size(), conditions.size(), redact_secrets(config.run.endpoint),
                       config.run.model, report.run_dir));
  if (auto ok = workload::write_generated_workload(*dir / "workload.jsonl", config.grid, *requests);
      !ok) {
    return std::unexpected(ok.error());
  }
  std::string driver_version, cuda_version;
  if (deps.memory) {
    const auto d = deps.memory->driver_info();
    driver_version = d.driver_version.value_or("");
    if (d.cuda_driver_version) cuda_version = gpu::format_cuda_version(*d.cuda_driver_version);
  }
  const auto write_manifest = [&](const std::string& status) {
    return write_json_file(*dir / "manifest.json",
                           manifest_json(config, report, status, driver_version, cuda_version));
  };
  if (auto ok = write_manifest("running"); !ok) return std::unexpected(ok.error());

  // Samplers on one clock, into the timeline and the traces (already running for a launch).
  if (!launched) {
    auto sampling = start_sampler(config, deps, *dir, std::nullopt, timeline, report);
    if (!sampling) return std::unexpected(sampling.error());
    sampler = std::move(*sampling);
  }
  if (!deps.memory) {
    warnings.add("GPU memory not sampled: " +
                 (deps.memory_note.empty() ? std::string("no memory source") : deps.memory_note));
  }
  const int64_t t_begin = now_ns();

  metrics::ScraperOptions mo;
  auto metrics_url = metrics::metrics_url_from_base(config.run.endpoint);
  if (!metrics_url) return std::unexpected(metrics_url.error());
  mo.metrics_url = *metrics_url;
  mo.read_snapshot = &engines::read_metrics;
  mo.interval_ms = config.metrics_interval_ms;
  mo.csv_path = *dir / "metrics_trace.csv";
  mo.on_record = [&timeline](const metrics::ScrapeRecord& r) { timeline.add_metrics(r); };
  mo.on_warning = [&warnings](const std::string& w) { warnings.add(w); };
  auto scraper = metrics::MetricsScraper::start(mo);
  if (!scraper) return std::unexpected(scraper.error());
  ConditionTracker tracker(**scraper, timeline, *requests, mo.timeout_ms + 500);

  // Baseline, warmup, post-warmup.
  progress(fmt::format("baseline: {:.1f} s without load", config.baseline_s));
  idle_wait(config.baseline_s, stop);
  const Window baseline_window{t_begin, now_ns()};
  if (!stop() && config.warmup_requests > 0) {
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
    progress(fmt::format("warmup: {} requests", warm->size()));
    client::RequestRunner warm_runner(config.run, make_transport());
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
      (*scraper)->stop();
      if (sampler) (void)sampler->stop();
      (void)write_manifest("failed");
      return fail(
          ErrorKind::network,
          fmt::format("every warmup request failed ({} of {}), the grid was not run: {}",
                      warm->size(), warm->size(), first_error.empty() ? "no answer" : first_error));
    }
    if (warm_result && warm_ok < warm->size()) {
      warnings.add(
          fmt::format("{} of {} warmup requests failed", warm->size() - warm_ok, warm->size()));
    }
  }
  const int64_t t_post_warmup = now_ns();
  idle_wait(config.post_warmup_s, stop);
  const Window post_warmup_window{t_post_warmup, now_ns()};

  // The grid.
  client::RunOptions grid_run = config.run;
  grid_run.min_condition_s = config.min_condition_s;
  client::RequestRunner runner(grid_run, make_transport());
  auto trace = client::TraceWriter::open(*dir / "request_trace.csv", runner.start_clock());
  if (!trace) return std::unexpected(trace.error());
  runner.set_on_record([&trace, &deps, &tracker](const client::RequestRecord& r) {
    tracker.add(r);
    if (deps.on_request) deps.on_request(r);
    return trace->write(r);
  });
  std::vector<Window> windows;
  auto* sampler_ptr = sampler.get();
  GridProgress grid_progress(requests->size(), now_ns());
  runner.set_progress([&](const client::Progress& p) {
    grid_progress.update(p, now_ns());
    if (deps.on_status) deps.on_status(grid_progress.status_text(p));
    if (p.done == 0 && !p.condition_done) {
      // A scrape just before it starts: the state it starts from. Outside the condition's window,
      // since a gauge can still show the previous condition's requests (vLLM updates it per step).
      tracker.begin();
      windows.push_back({now_ns(), 0});
      return;
    }
    if (!GridProgress::condition_ended(p) || windows.empty()) return;
    tracker.end();  // a scrape as it ends: the progress line shows this condition's figures
    windows.back().end_ns = now_ns();
    if (deps.on_condition_end && !p.stopped) {
      deps.on_condition_end(
          p.condition_id,
          static_cast<double>(windows.back().end_ns - windows.back().begin_ns) / 1e9);
    }
    std::string mem = "-";
    if (sampler_ptr != nullptr && deps.memory) {
      uint64_t used = 0;
      for (const auto& g : sampler_ptr->gpu_peaks()) {
        if (g.latest && g.latest->memory.used_bytes) used += *g.latest->memory.used_bytes;
      }
      mem = format_bytes(used);
    }
    progress(grid_progress.end_text(
        p, static_cast<double>(windows.back().end_ns - windows.back().begin_ns) / 1e9, mem,
        tracker.progress_text(windows.back())));
  });
  // A trace that can no longer be written (a full disk) ends the run like a stop request.
  const auto write_failure = [&]() -> std::optional<Error> {
    if (sampler && sampler->failed()) {
      return Error{ErrorKind::io, "the GPU/host memory trace could not be written"};
    }
    return (*scraper)->write_error();
  };
  const int64_t t_load = now_ns();
  auto result = runner.run(*requests, [&] { return stop() || write_failure().has_value(); });
  const int64_t t_load_end = now_ns();
  for (auto& w : windows) {
    if (w.end_ns == 0) w.end_ns = t_load_end;
  }
  // One more scrape and sample so the end of the load is in the traces.
  const uint64_t scrapes = (*scraper)->stats().n_scrapes;
  (*scraper)->wait_for_scrapes(scrapes + 1, config.metrics_interval_ms * 2 + 500);
  const Window load_window{t_load, now_ns()};
  (*scraper)->stop();
  std::optional<Error> trace_error = (*scraper)->write_error();
  if (launched) {
    progress("stopping the launched server");
    stop_launched(*config.launch, *launched, timeline, deps.memory != nullptr, launch);
    if (!launch.stop.group_gone) {
      warnings.add(
          fmt::format("processes of the launched server's group {} were still there after "
                      "SIGKILL",
                      launch.pid));
    }
    if (launch.memory_released == false) {
      warnings.add(
          fmt::format("GPU memory did not come back within {:.0f} s of stopping the "
                      "launched server",
                      config.launch->release_wait_s));
    }
  }
  if (sampler) {
    if (auto ok = sampler->stop(); !ok) trace_error = ok.error();
    if (deps.memory && !trace_error) {
      if (auto w = fill_memory_gaps(*deps.memory, *sampler, config.gpu_interval_ms, *dir, timeline,
                                    report)) {
        warnings.add(*w);
      }
    }
  }
  if (trace_error) warnings.add(trace_error->message);

  // Analysis.
  const auto memory = timeline.memory();
  const auto host_points = timeline.host();
  const auto scraped = timeline.metrics();
  report.baseline = capture_point("baseline", memory, baseline_window, false);
  report.post_warmup = capture_point("post_warmup", memory, post_warmup_window, false);
  report.peak = capture_point("peak", memory, load_window, true);
  report.server_during_load = metrics_in(scraped, load_window);
  if (!scraped.empty()) {
    report.engine_type = std::string(engines::engine_name(scraped.back().snapshot.engine));
  }
  if (result) {
    report.interrupted = result->stopped;
    report.max_in_flight = result->max_in_flight;
    report.transport = result->transport;
    for (size_t i = 0; i < result->conditions.size(); ++i) {
      const Window w = i < windows.size() ? windows[i] : load_window;
      report.conditions.push_back({result->conditions[i],
                                   w,
                                   memory_in(memory, w),
                                   metrics_in(scraped, w),
                                   {},
                                   peak_rss_in(host_points, w)});
    }
  }
  report.derived = derive_answers(condition_facts(*requests, report.conditions, scraped),
                                  kv_peak_in(scraped, load_window));
  analyse_memory(config, memory, scraped, load_window, post_warmup_window, report);
  if (sampler) {
    report.host = sampler->host_peak();
    report.sampler = sampler->stats();
  }
  report.scraper = (*scraper)->stats();
  if (auto w = assess_conditions(tracker.kv(), deps.memory != nullptr, report)) warnings.add(*w);
  if (launched) {
    launch.marks = watcher.marks();
    report.launch = launch_json(launch, memory);
    report.engine_reported = engine_reported_json(watcher.finish(), "server.log");
    // A server that logged no buffers (a quiet llama.cpp) may state them in /props.
    if (report.engine_reported["components"].empty() && report.server.props_buffers)
      report.engine_reported = engine_reported_json(*report.server.props_buffers, "/props");
  } else if (!config.server_log.empty()) {
    if (auto log =
            enginelog::parse_engine_log_file(config.server_log, engines::log_parse_options())) {
      report.engine_reported = engine_reported_json(*log, config.server_log.string());
    } else {
      warnings.add("--server-log: " + log.error().message);
    }
  } else if (report.server.props_buffers) {
    report.engine_reported = engine_reported_json(*report.server.props_buffers, "/props");
  } else if (report.server.llamacpp_props) {
    warnings.add(
        "this llama.cpp server states no buffer sizes in /props: give --server-log with its "
        "startup log, or start it with --launch, for the engine's own figures");
  }
  if (!report.comparison.empty() && report.baseline.empty() && config.estimate) {
    // The buffers the plan says the engine will log, read as its log is.
    std::string plan_log;
    for (const auto& line : config.estimate->engine_report.log_lines)
      plan_log += line + "\n";
    const auto planned = engine_reported_json(
        enginelog::parse_engine_log(plan_log,
                                    engines::log_parse_options(config.estimate->settings.engine)),
        "plan");
    compare_with_engine_figures(report.comparison, report.engine_reported, planned,
                                report.host ? report.host->peak_rss_bytes : std::nullopt);
  }
  report.ended_unix_s = now_unix_s();
  for (const auto& w : warnings.list())
    report.warnings.push_back(w);

  ProfileOutcome out;
  out.run_dir = *dir;
  out.interrupted = (report.interrupted || stop()) && !trace_error;
  report.interrupted = out.interrupted;
  out.summary = summary_json(report);
  out.text = summary_text(report);
  out.totals = request_totals(report);
  const auto summary_ok = write_json_file(*dir / "summary.json", out.summary);
  const auto manifest_ok = write_manifest(!result || trace_error ? "failed"
                                          : out.interrupted      ? "interrupted"
                                                                 : "completed");
  if (!result) return std::unexpected(result.error());
  if (trace_error) return std::unexpected(*trace_error);
  if (!summary_ok) return std::unexpected(summary_ok.error());
  if (!manifest_ok) return std::unexpected(manifest_ok.error());
  out.report = std::move(report);
  return out;
}

}  // namespace kvprof::profile
