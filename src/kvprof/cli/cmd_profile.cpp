// `kvprof profile`: measure a live OpenAI-compatible server (or, with no --endpoint, the built-in
// default: a real llama.cpp server on a dummy-weight model; --sim: the SIMULATED vLLM server)
// through a workload grid; GPU memory through NVML, host memory, the server's /metrics and every
// request's timing on one clock, into results/<run_id>/.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/estimate_options.hpp"
#include "kvprof/cli/profile_default.hpp"
#include "kvprof/cli/run_report.hpp"
#include "kvprof/cli/target_options.hpp"
#include "kvprof/client/cli_options.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/gpu/source_select.hpp"
#include "kvprof/profile/estimate_check.hpp"
#include "kvprof/profile/launch_plan.hpp"
#include "kvprof/profile/profiler.hpp"
#include "kvprof/profile/server_probe.hpp"
#include "kvprof/report/text/progress_line.hpp"
#include "kvprof/results/history_entries.hpp"
#include "kvprof/run/target.hpp"
#include "kvprof/sim/sim_jitter.hpp"
#include "kvprof/sim/sim_sizing.hpp"
#include "kvprof/sys/signals.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/redact.hpp"
#include "kvprof/util/units.hpp"
#include "kvprof/workload/cli_options.hpp"

namespace kvprof::cli {

namespace {

struct ProfileCliState {
  workload::GridCliValues grid;
  client::RunCliValues run;
  std::vector<unsigned> gpus;
  uint32_t gpu_interval_ms = 20;
  uint32_t process_interval_ms = 500;
  std::string gpu_source = "auto";
  std::string gpu_selector;
  int host_pid = 0;
  bool no_host_mem = false;
  std::string metrics_interval = "auto";
  double min_condition_s = -1;  // < 0: the default for the server (min_condition_default)
  std::string output_dir = "results";
  std::string run_tag;
  double baseline_s = 1.0;
  uint32_t warmup_requests = 2;
  double post_warmup_s = 0.5;
  std::string estimate_with;
  model::ArchitectureHints architecture;  // checked against the model; describes an unknown one
  std::string sim_gpu = "H100";
  double sim_tokens_per_s = 0;
  std::optional<uint64_t> sim_seed;
  bool sim_no_jitter = false;
  bool sim = false;       // --sim: the simulated vLLM server instead of the default engine
  std::string llama_lib;  // the default engine's libllama (empty: the usual search)
  LaunchCliValues launch;
  std::string server_log;
  bool json = false;
  bool quiet = false;
  bool no_color = false;
  bool no_report = false;
  CLI::App* cmd = nullptr;
};

// --min-condition-s when not given: 1 s against a real server (a condition of a few requests on a
// fast server can end within one scrape interval; a second gives each condition at least 8
// scrape ticks and still rarely repeats a request of a large model, whose conditions last
// longer); 0.2 s for the built-in simulator, whose quick grid's conditions last about 0.1 s
// (the whole default run stays within a few seconds).
constexpr double k_min_condition_endpoint_s = 1.0;
constexpr double k_min_condition_simulator_s = 0.2;

// --metrics-interval-ms: "auto" (0) or milliseconds in [10, 60000]; a usage error otherwise.
uint32_t parse_metrics_interval(const std::string& text) {
  if (text == "auto") return 0;
  char* end = nullptr;
  const unsigned long ms = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || ms < 10 || ms > 60000) {
    throw Fatal({ErrorKind::usage,
                 fmt::format("--metrics-interval-ms: '{}' is neither auto nor a number of "
                             "milliseconds from 10 to 60000",
                             text)});
  }
  return static_cast<uint32_t>(ms);
}

// The small grid the built-in default runs when no grid option was given.
bool grid_given(const CLI::App* cmd) {
  for (const char* name : {"--input-lens", "--output-lens", "--concurrencies", "--prefix-modes",
                           "--n-per-condition", "--request-rate"}) {
    if (cmd->get_option(name)->count() > 0) return true;
  }
  return false;
}

nlohmann::json user_configuration(const ProfileCliState& st) {
  return {{"input_lens", st.grid.input_lens},
          {"output_lens", st.grid.output_lens},
          {"concurrencies", st.grid.concurrencies},
          {"prefix_modes", st.grid.prefix_modes},
          {"n_per_condition", st.grid.n_per_condition},
          {"endpoint", !st.launch.command.empty() ? "(launched)"
                       : st.run.endpoint.empty()  ? "(built-in simulator)"
                                                  : redact_secrets(st.run.endpoint)},
          {"model", st.run.model},
          {"estimate_with", st.estimate_with},
          {"sim_gpu", st.run.endpoint.empty() && st.launch.command.empty() ? st.sim_gpu : ""},
          {"launch", redact_secrets(st.launch.command)},
          {"container", st.launch.container},
          {"server_log", st.server_log}};
}

// Whether a flag of the simulator was given (it asks for the simulator as --sim does).
bool sim_flags_given(const CLI::App* cmd) {
  for (const char* name :
       {"--sim", "--sim-gpu", "--sim-tokens-per-s", "--sim-seed", "--sim-no-jitter"}) {
    if (cmd->get_option(name)->count() > 0) return true;
  }
  return false;
}

// No --endpoint, --launch or --sim: the default engine, launched as --launch would; false when
// libllama is missing (the simulator runs instead, as said first).
bool use_default_engine(ProfileCliState& st) {
  auto engine = default_engine(st.run.model, st.output_dir, st.llama_lib);
  if (!engine) {
    if (engine.error().kind != ErrorKind::driver) throw Fatal(engine.error());
    if (!st.quiet) {
      std::fprintf(stderr,
                   "kvprof: the default profiles a real llama.cpp server, but %s\n"
                   "kvprof: running the SIMULATED vLLM server instead (--sim)\n",
                   engine.error().message.c_str());
    }
    return false;
  }
  if (!st.quiet) {
    std::fprintf(stderr,
                 "kvprof: no --endpoint or --launch: profiling a real llama.cpp server (kvprof "
                 "serve, libllama in-process) on %s with dummy weights (%s%s), -c %u -np %u, "
                 "against kvprof's plan; --sim for the simulated vLLM server\n",
                 engine->model_id.c_str(), engine->gguf.c_str(),
                 engine->made_now ? ", made now" : "", k_default_engine_ctx,
                 k_default_engine_slots);
  }
  st.launch.command = engine->command;
  st.run.model.clear();  // the name the server gives its file
  return true;
}

void run_profile_command(ProfileCliState& st) {
  resolve_container(st.launch, st.run.endpoint);
  const bool no_server = st.run.endpoint.empty() && st.launch.command.empty();
  const bool default_engine_run =
      no_server && !sim_flags_given(st.cmd) && st.server_log.empty() && use_default_engine(st);
  if (default_engine_run && !grid_given(st.cmd)) {
    st.grid.input_lens = {"128", "512"};
    st.grid.output_lens = {"16"};
    st.grid.concurrencies = {"1", "4"};
    st.grid.prefix_modes = {"low"};
  }
  if (!st.launch.command.empty() && !st.server_log.empty()) {
    throw Fatal({ErrorKind::usage,
                 "--server-log and --launch do not go together: with --launch kvprof reads the "
                 "launched server's own output (server.log in the run folder)"});
  }
  const bool simulate = st.run.endpoint.empty() && st.launch.command.empty();
  profile::ProfileConfig config;
  if (simulate && !grid_given(st.cmd)) {
    st.grid.input_lens = {"512", "2048"};
    st.grid.output_lens = {"32"};
    st.grid.concurrencies = {"1", "8", "32"};
  }
  config.grid = value_or_fatal(workload::resolve(st.grid));
  config.configuration = user_configuration(st);
  config.gpus = st.gpus;
  config.gpu_interval_ms = st.gpu_interval_ms;
  config.process_interval_ms = st.process_interval_ms;
  if (st.host_pid > 0) config.host_pid = st.host_pid;
  config.host_pid_auto = !st.no_host_mem;
  config.metrics_interval_ms = parse_metrics_interval(st.metrics_interval);
  config.min_condition_s = st.min_condition_s >= 0 ? st.min_condition_s
                           : simulate              ? k_min_condition_simulator_s
                                                   : k_min_condition_endpoint_s;
  config.output_dir = st.output_dir;
  config.run_tag = st.run_tag;
  config.baseline_s = st.baseline_s;
  config.warmup_requests = st.warmup_requests;
  config.post_warmup_s = st.post_warmup_s;
  config.estimate_flags = st.estimate_with;
  config.server_log = st.server_log;

  // The server and its memory: the simulator, the endpoint or the launched server.
  run::TargetSpec spec = target_spec(
      st.launch, st.run.endpoint, st.run.model,
      *std::max_element(config.grid.concurrencies.begin(), config.grid.concurrencies.end()),
      simulate);
  spec.sim.model = st.run.model.empty() ? std::string(k_default_model) : st.run.model;
  spec.sim.gpu = st.sim_gpu;
  spec.sim.port = 0;
  if (st.sim_tokens_per_s > 0) spec.sim.tokens_per_s = st.sim_tokens_per_s;
  if (!st.sim_no_jitter) spec.sim.jitter_seed = st.sim_seed.value_or(sim::fresh_jitter_seed());
  if (!simulate) {
    // A remote server is measured through the monitoring of its node, never this machine's NVML.
    spec.gpu_source = value_or_fatal(gpu::parse_gpu_source(st.gpu_source));
    const bool remote_spec = spec.gpu_source->kind == gpu::GpuSourceKind::dcgm ||
                             spec.gpu_source->kind == gpu::GpuSourceKind::prometheus;
    if (remote_spec && st.cmd->get_option("--gpu-interval-ms")->count() == 0) {
      config.gpu_interval_ms = 1000;  // monitoring updates about once a second at best
    }
    spec.gpu_selector = st.gpu_selector;
    spec.gpu_min_refresh_ms = config.gpu_interval_ms / 2;
  }
  const auto target = value_or_fatal(run::open_target(spec));
  st.run.endpoint = target->endpoint;
  if (target->launch) config.launch = target->launch;
  profile::ProfileDeps deps;
  deps.memory_source = target->memory_name;
  deps.memory_note = target->memory_note;
  EstimateOptions est_defaults;
  if (simulate) {
    // The built-in simulator: a SIMULATED vLLM server sized by the planner, in this process.
    st.run.model = spec.sim.model;
    config.simulation = target->simulation;
    config.simulation_details = target->simulation_details;
    est_defaults.gpu = spec.sim.gpu;
    if (st.estimate_with.empty()) {
      config.estimate = value_or_fatal(sim::estimate_for_sim(spec.sim));
      if (config.estimate) {
        config.estimate_flags =
            fmt::format("--model {} --gpu {} (the plan that sized the simulator)", spec.sim.model,
                        spec.sim.gpu);
        config.estimate_assumptions = profile::estimate_assumptions(
            *config.estimate, {profile::GpuOrigin::simulated, "--sim-gpu", {}});
      }
    }
  } else if (target->memory_remote) {
    config.process_interval_ms = 0;  // no per-process figures remotely
    // Idle windows long enough for two readings at the monitoring's pace.
    const double two_readings_s = 2.0 * config.gpu_interval_ms / 1000.0;
    if (st.cmd->get_option("--baseline-s")->count() == 0) {
      config.baseline_s = std::max(config.baseline_s, two_readings_s);
    }
    if (st.cmd->get_option("--post-warmup-s")->count() == 0) {
      config.post_warmup_s = std::max(config.post_warmup_s, two_readings_s);
    }
  }
  if (target->memory_warn && !st.quiet)
    std::fprintf(stderr, "kvprof: warning: %s\n", target->memory_note.c_str());
  gpu::MemorySource* memory = target->memory;
  config.run = value_or_fatal(client::resolve(st.run));
  // The architecture flags ask for a plan as --estimate-with does (the profiled model and GPU).
  if (!st.estimate_with.empty() || st.architecture.any()) {
    est_defaults.architecture = st.architecture;
    est_defaults.model = config.run.model;
    if (est_defaults.model.empty() && config.launch) {
      // The model the launch command serves (llama-server -m X.gguf, vllm serve DIR).
      if (auto r = engines::read_launch_command(config.launch->command); r && !r->model.empty())
        est_defaults.model = r->model;
    } else if (est_defaults.model.empty()) {
      const auto info =
          value_or_fatal(profile::probe_server(config.run.endpoint, config.run.api_key));
      if (!info.models.empty()) est_defaults.model = info.models.front();
    }
    profile::AssumptionSources sources{
        simulate ? profile::GpuOrigin::simulated : profile::GpuOrigin::assumed,
        simulate ? "--sim-gpu" : "no GPU found", estimate_flags_given(st.estimate_with)};
    if (est_defaults.gpu.empty() && memory != nullptr) {
      if (auto d = memory->device_info(st.gpus.empty() ? 0 : st.gpus.front()); d && d->name) {
        if (gpu::find_gpu(*d->name)) {
          est_defaults.gpu = *d->name;
          sources.gpu_origin = profile::GpuOrigin::detected;
          sources.gpu_note = "from " + deps.memory_source;
        } else {
          sources.gpu_note = fmt::format("'{}' is not in kvprof's GPU catalog", *d->name);
        }
      }
    }
    if (sources.given.contains("gpu") || sources.given.contains("gpu-mem")) {
      sources.gpu_origin = profile::GpuOrigin::given;
      sources.gpu_note = "--estimate-with";
    }
    auto input = value_or_fatal(parse_estimate_flags(st.estimate_with, est_defaults));
    config.estimate = value_or_fatal(engines::plan(input));
    // What the plan found in the model (an architecture given that differs from it, a model
    // described only by the architecture given) qualifies the comparison.
    if (!st.quiet) {
      for (const auto& w : input.model.warnings)
        std::fprintf(stderr, "kvprof: warning: the plan: %s\n", w.c_str());
    }
    config.estimate_assumptions = profile::estimate_assumptions(*config.estimate, sources);
    if (sources.gpu_origin == profile::GpuOrigin::assumed && !st.quiet) {
      std::fprintf(stderr,
                   "kvprof: warning: --estimate-with: %s; the plan assumes %s (%.1f GiB): give "
                   "--gpu in --estimate-with\n",
                   sources.gpu_note.c_str(), config.estimate->gpu.name.c_str(),
                   bytes_to_gib(config.estimate->gpu.memory_bytes));
    }
  } else if (config.launch) {
    // The plan of the launched server, read from its command, as `bench` plans its engine.
    if (auto plan = profile::plan_from_launch(config.launch->command, config.grid, memory,
                                              st.gpus.empty() ? 0 : st.gpus.front())) {
      config.estimate = std::move(plan->estimate);
      config.estimate_flags = std::move(plan->flags);
      config.estimate_assumptions = std::move(plan->assumptions);
      if (!st.quiet) {
        for (const auto& n : plan->notes)
          std::fprintf(stderr, "kvprof: the plan: %s\n", n.c_str());
      }
    } else if (!st.quiet) {
      std::fprintf(stderr, "kvprof: note: no plan to compare with: %s (give --estimate-with)\n",
                   plan.error().message.c_str());
    }
  }

  deps.memory = memory;
  sys::install_stop_handlers();
  deps.should_stop = [] { return sys::stop_requested(); };
  std::unique_ptr<report::text::ProgressLine> progress;
  if (!st.quiet) {
    progress = report::text::stderr_progress(st.no_color);
    deps.on_progress = [&progress](const std::string& line) {
      progress->line(line, report::text::tone_of(line));
    };
    deps.on_status = [&progress](const std::string& line) { progress->status(line); };
  }
  auto outcome = profile::run_profile(config, deps);
  progress.reset();  // the status line ends before the table
  target->stop();
  if (!outcome) throw Fatal(outcome.error());
  if (auto run = results::read_run_summary(outcome->summary, {}, outcome->run_dir))
    results::record_or_warn(config.output_dir, results::history_entry(*run));
  if (st.json) {
    std::printf("%s\n", json_text(outcome->summary, 2).c_str());
  } else {
    std::fputs(outcome->text.c_str(), stdout);
  }
  std::fflush(stdout);
  if (!st.no_report) report_run_folder(outcome->run_dir, st.json);
  const auto& t = outcome->totals;
  if (outcome->interrupted) {
    throw Fatal({ErrorKind::interrupted,
                 fmt::format("interrupted; {}; everything measured is in {}",
                             profile::request_totals_text(t), outcome->run_dir.string())});
  }
  if (t.n_ok == 0)
    throw Fatal({ErrorKind::network, "no request succeeded (see request_trace.csv)"});
  if (t.n_errors > 0) {
    throw Fatal({ErrorKind::partial, fmt::format("{} of {} requests failed (see request_trace.csv)",
                                                 t.n_errors, t.n_requests)});
  }
}

}  // namespace

void register_profile_command(CLI::App& app) {
  auto st = std::make_shared<ProfileCliState>();
  st->run.endpoint.clear();  // empty: the built-in default engine (or --sim)
  auto* cmd = app.add_subcommand(
      "profile",
      "Measure a live OpenAI-compatible server through a workload grid: GPU memory (NVML), the "
      "server's /metrics and every request's timing on one clock, into results/<run_id>/ "
      "(summary.json, manifest.json, traces). Without --endpoint or --launch: a real llama.cpp "
      "server (kvprof serve) on a dummy-weight Qwen2.5-0.5B, measured against kvprof's plan on a "
      "small grid; --sim: the built-in SIMULATED vLLM server. Exit codes: 0 ok, 1 failure, 2 bad "
      "usage, 3 some requests "
      "failed, 130 interrupted (summary still written)");
  st->cmd = cmd;
  workload::add_grid_options(cmd, st->grid);
  client::add_run_options(cmd, st->run);
  cmd->get_option("--endpoint")
      ->description(
          "Server base URL (http://host:port or .../v1); default: the built-in real llama.cpp "
          "server (--sim: the SIMULATED vLLM server)");
  cmd->get_option("--model")->description(
      "Model name to request (default: the server's first model); with the default engine: a "
      "catalog model served with dummy weights, or a .gguf file (default " +
      std::string(k_default_engine_model) + "); with --sim: the model to simulate (default " +
      std::string(k_default_model) + ")");
  auto* sampling = cmd->add_option_group("sampling");
  sampling->add_option("--gpus", st->gpus, "GPU indices to sample, e.g. 0,1 (default: all)")
      ->envname("KVPROF_GPU_INDICES")
      ->delimiter(',');
  sampling->add_option("--gpu-interval-ms", st->gpu_interval_ms, "GPU memory sample period")
      ->envname("KVPROF_GPU_INTERVAL_MS")
      ->check(CLI::Range(1, 60000))
      ->capture_default_str();
  sampling
      ->add_option("--process-interval-ms", st->process_interval_ms,
                   "Per-process GPU memory period (0 = off)")
      ->capture_default_str();
  sampling
      ->add_option("--gpu-source", st->gpu_source,
                   "Where GPU memory comes from: auto (NVML when the server runs on this "
                   "machine, else none), nvml, none, dcgm=URL (a DCGM exporter's /metrics on the "
                   "server's node) or prometheus=URL (a Prometheus server scraping DCGM; readings "
                   "that fail are filled afterwards from its query_range history)")
      ->envname("KVPROF_GPU_SOURCE")
      ->capture_default_str();
  sampling
      ->add_option("--gpu-selector", st->gpu_selector,
                   "Label selector for dcgm=/prometheus= series, e.g. '{Hostname=\"node1\"}'")
      ->envname("KVPROF_GPU_SELECTOR");
  sampling->add_option("--pid", st->host_pid,
                       "Sample this process's host memory (default: the endpoint's listening "
                       "process when it is on this machine)");
  sampling->add_flag("--no-host-mem", st->no_host_mem, "Do not sample host memory");
  sampling
      ->add_option("--metrics-interval-ms", st->metrics_interval,
                   "/metrics scrape period in ms (10 to 60000), or auto: --min-condition-s / 8, "
                   "at least 20 ms (at most 50 scrapes a second, light on the server) and at "
                   "most 1000 ms, so each condition gets at least 5 scrapes. Besides these "
                   "ticks /metrics is scraped as each condition starts and as it ends")
      ->envname("KVPROF_METRICS_INTERVAL_MS")
      ->capture_default_str();
  sampling
      ->add_option("--min-condition-s", st->min_condition_s,
                   "Shortest condition: a condition whose requests all ended sooner sends them "
                   "again (the same lengths, the prompt after any shared prefix rotated) until "
                   "it lasted this long. Repeats are real requests: in request_trace.csv (column "
                   "repeat > 0) and in the condition's statistics (n_repeated). 0 = each request "
                   "once. Default 1 s against a server, 0.2 s for the built-in simulator")
      ->envname("KVPROF_MIN_CONDITION_S")
      ->check(CLI::Range(0.0, 3600.0));
  auto* phases = cmd->add_option_group("phases");
  phases->add_option("--baseline-s", st->baseline_s, "Idle seconds measured before any request")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  phases
      ->add_option("--warmup-requests", st->warmup_requests,
                   "Small requests sent before the grid (not in the trace)")
      ->capture_default_str();
  phases->add_option("--post-warmup-s", st->post_warmup_s, "Idle seconds measured after warmup")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  add_launch_options(
      cmd, st->launch,
      "Start this server command, e.g. \"vllm serve {model} --port {port} "
      "--max-num-seqs {max_concurrency}\" ({model}, {port}: a free port or "
      "--endpoint's, {host}, {max_concurrency}: the grid's largest); its output goes "
      "to server.log, its startup is sampled and timed, and it is stopped at the end");
  add_container_option(cmd, st->launch);
  cmd->add_option("--server-log", st->server_log,
                  "The log of a server started elsewhere: its engine-reported memory figures go "
                  "into summary.json")
      ->check(CLI::ExistingFile);
  cmd->add_option("--estimate-with", st->estimate_with,
                  "Compare with the plan for these engine flags, e.g. \"-tp 2 "
                  "--gpu-memory-utilization 0.9 --gpu H100\" (model and GPU default to the "
                  "profiled ones)");
  add_architecture_options(cmd, st->architecture);
  cmd->add_option("--output-dir", st->output_dir, "Where results/<run_id>/ goes")
      ->envname("KVPROF_OUTPUT_DIR")
      ->capture_default_str();
  cmd->add_option("--run-tag", st->run_tag, "Appended to the run id")->envname("KVPROF_RUN_TAG");
  cmd->add_option("--llama-lib", st->llama_lib,
                  "libllama of the default engine (no --endpoint or --launch): the file or its "
                  "folder (default: KVPROF_LLAMA_LIB, then .deps/llama/ beside kvprof)");
  auto* simg = cmd->add_option_group("built-in simulator (--sim)");
  simg->add_option("--sim-gpu", st->sim_gpu, "Catalog GPU the simulator pretends to be")
      ->capture_default_str();
  simg->add_option("--sim-tokens-per-s", st->sim_tokens_per_s,
                   "Decode speed of a lone sequence in the simulator (default 500)");
  simg->add_option("--sim-seed", st->sim_seed,
                   "Seed of the simulated engine's differences from the plan (non-torch, "
                   "activation, CUDA graph memory, fragmentation; default: a new one each run, "
                   "printed in summary.json)");
  simg->add_flag("--sim", st->sim,
                 "Profile the built-in SIMULATED vLLM server (a GPU-shaped demonstration sized by "
                 "the planner) instead of the default real llama.cpp server");
  simg->add_flag("--sim-no-jitter", st->sim_no_jitter,
                 "Size the simulator exactly as planned (the comparison then only checks the "
                 "measurement pipeline)");
  cmd->add_flag("--json", st->json, "Print summary.json instead of the table");
  cmd->add_flag("-q,--quiet", st->quiet, "No progress lines on stderr");
  cmd->add_flag("--no-color", st->no_color, "No colour in the progress (also: NO_COLOR=1)");
  cmd->add_flag("--no-report", st->no_report,
                "Do not write report.html and the figures into the run folder");
  cmd->callback([st] { run_profile_command(*st); });
}

}  // namespace kvprof::cli
