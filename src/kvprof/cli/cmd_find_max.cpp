// `kvprof find-max`: the largest concurrency a server runs at --input-len/--output-len with no
// errors, no preemption, no queueing, memory under --max-memory-frac and the SLOs met — found by
// starting from the estimate's answer, bracketing and bisecting, each step a profile run kept in
// results/<run_id>/. The server: --endpoint, --launch (started once for all steps), llama.cpp
// in-process (--model X.gguf with bench's engine flags: each step a bench run), or the built-in
// SIMULATED vLLM server.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "kvprof/bench/bench_estimate.hpp"
#include "kvprof/cli/bench_options.hpp"
#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/estimate_options.hpp"
#include "kvprof/cli/output.hpp"
#include "kvprof/cli/run_report.hpp"
#include "kvprof/cli/target_options.hpp"
#include "kvprof/client/cli_options.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/estimate/inverse.hpp"
#include "kvprof/experiment/find_max_bench.hpp"
#include "kvprof/experiment/find_max_profile.hpp"
#include "kvprof/profile/launch_plan.hpp"
#include "kvprof/profile/manifest.hpp"
#include "kvprof/report/text/progress_line.hpp"
#include "kvprof/run/target.hpp"
#include "kvprof/sim/sim_sizing.hpp"
#include "kvprof/sys/host_info.hpp"
#include "kvprof/sys/signals.hpp"
#include "kvprof/util/clock.hpp"
#include "kvprof/util/redact.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::cli {

namespace {

struct FindMaxState {
  client::RunCliValues run;
  uint32_t input_len = 0;
  uint32_t output_len = 0;
  std::optional<double> slo_ttft_ms, slo_itl_ms, max_memory_frac;
  uint32_t min_concurrency = 1;
  uint32_t max_concurrency = 256;
  std::optional<uint32_t> start;
  std::string estimate_with;
  uint32_t waves = 1;
  LaunchCliValues launch;
  std::string sim_gpu = "H100";
  std::optional<uint32_t> sim_num_gpu_blocks, sim_max_num_seqs;
  double sim_tokens_per_s = 0;
  bench::BenchConfig bench;  // llama.cpp in-process: bench's engine flags
  BenchEngineFlags bench_flags;
  CLI::App* bench_group = nullptr;
  std::string output_dir = "results";
  bool quiet = false;
  bool no_color = false;
  bool no_report = false;
  OutputOptions out;
  CLI::App* cmd = nullptr;
};

// The estimate's answer at input + output tokens, within the engine's sequence limit.
uint32_t estimated_start(const estimate::Estimate& est, uint64_t tokens) {
  uint64_t c = estimate::max_concurrency_at(est, tokens);
  if (est.engine_report.max_num_seqs > 0) c = std::min<uint64_t>(c, est.engine_report.max_num_seqs);
  if (est.max_parallel_requests > 0) c = std::min<uint64_t>(c, est.max_parallel_requests);
  return static_cast<uint32_t>(std::min<uint64_t>(std::max<uint64_t>(c, 1), UINT32_MAX));
}

// Whether the steps run llama.cpp in-process: no server named, and a GGUF or an engine flag.
bool runs_in_process(const FindMaxState& st) {
  const bool engine_flags = any_bench_engine_option_given(st.bench_group);
  if (!st.run.endpoint.empty() || !st.launch.command.empty()) {
    if (engine_flags) {
      throw Fatal({ErrorKind::usage,
                   "the llama.cpp engine flags (-c, --parallel, ...) run the engine in-process "
                   "with --model X.gguf; with --endpoint or --launch give them to the server"});
    }
    return false;
  }
  return engine_flags || to_lower(st.run.model).ends_with(".gguf");
}

// The in-process trial: bench's settings checked (the GGUF, -c, the library) before any run
// folder is made, and the start from the llama.cpp planner.
experiment::BenchTrialSettings in_process_settings(FindMaxState& st,
                                                   experiment::FindMaxLimits& limits,
                                                   std::unique_ptr<run::Target>& target) {
  if (st.run.model.empty()) {
    throw Fatal({ErrorKind::usage, "the llama.cpp engine flags need --model X.gguf"});
  }
  auto& config = st.bench;
  config.engine.model_path = st.run.model;
  apply_bench_engine_flags(st.bench_flags, config);
  if (!config.ctx_from_user) {
    throw Fatal({ErrorKind::usage,
                 "find-max on the in-process engine needs -c (the KV cells the steps fill)"});
  }
  if (config.engine.n_ctx == 0 || (config.parallel_from_user && config.engine.n_seq_max == 0)) {
    throw Fatal({ErrorKind::usage, "-c and --parallel must be at least 1"});
  }
  value_or_fatal(llama::find_llama_library(config.library));
  experiment::BenchTrialSettings bt;
  run::TargetSpec engine;
  engine.kind = run::TargetKind::in_process;
  engine.gpu_source = value_or_fatal(gpu::parse_gpu_source(st.bench_flags.gpu_source));
  target = value_or_fatal(run::open_target(engine));
  bt.gpu = target->memory;
  bt.gpu_name = target->memory_name;
  bt.config = config;
  bt.input_len = st.input_len;
  bt.output_len = st.output_len;
  bt.host_total_bytes = sys::read_mem_info().total_bytes;
  if (auto spec = bench::bench_model_spec(config)) {
    limits.start = experiment::bench_estimated_start(config, *spec, bt.gpu != nullptr, st.input_len,
                                                     st.output_len);
    if (limits.start) {
      limits.start_source = fmt::format(
          "kvprof's llama.cpp plan: its KV cells for -c {} over {} cells per sequence",
          config.engine.n_ctx, experiment::sequence_kv_cells(st.input_len, st.output_len));
    }
  }
  return bt;
}

void run_find_max(FindMaxState& st) {
  resolve_container(st.launch, st.run.endpoint);
  const bool in_process = runs_in_process(st);
  const bool simulate = !in_process && st.run.endpoint.empty() && st.launch.command.empty();
  experiment::FindMaxLimits limits;
  limits.input_len = st.input_len;
  limits.output_len = st.output_len;
  limits.slo_ttft_ms = st.slo_ttft_ms;
  limits.slo_itl_ms = st.slo_itl_ms;
  limits.max_memory_frac = st.max_memory_frac;
  limits.min_concurrency = st.min_concurrency;
  limits.max_concurrency = st.max_concurrency;
  if (st.max_memory_frac && !(*st.max_memory_frac > 0 && *st.max_memory_frac <= 1)) {
    throw Fatal({ErrorKind::usage, "--max-memory-frac must be in (0, 1]"});
  }

  // The engine and its memory, opened once for every trial: llama.cpp in-process, or the
  // simulator, the endpoint or the launched server (below).
  std::optional<experiment::BenchTrialSettings> bench_trial;
  std::unique_ptr<run::Target> target;
  if (in_process) bench_trial = in_process_settings(st, limits, target);
  // Where the steps go: results/<run_id>/ holds each step's run folder and find_max.json.
  std::string run_id = profile::make_run_id("find-max", unix_now_s());
  const auto dir = value_or_fatal(profile::create_run_dir(st.output_dir, run_id));

  profile::ProfileDeps deps;
  std::optional<estimate::Estimate> plan;
  if (in_process) {
    bench_trial->output_dir = dir;
  } else {
    // The server: the simulator, the endpoint, or the launched server, started once for all
    // trials.
    run::TargetSpec spec =
        target_spec(st.launch, st.run.endpoint, st.run.model, st.max_concurrency, simulate);
    spec.launch.start_now = true;
    spec.launch.log_path = dir / "server.log";
    spec.launch.api_key = st.run.api_key;
    spec.sim.model = st.run.model.empty() ? std::string(k_default_model) : st.run.model;
    spec.sim.gpu = st.sim_gpu;
    spec.sim.port = 0;
    spec.sim.num_gpu_blocks = st.sim_num_gpu_blocks;
    spec.sim.max_num_seqs = st.sim_max_num_seqs;
    if (st.sim_tokens_per_s > 0) spec.sim.tokens_per_s = st.sim_tokens_per_s;
    spec.gpu_source = value_or_fatal(gpu::parse_gpu_source(st.bench_flags.gpu_source));
    target = value_or_fatal(run::open_target(spec, [] { return sys::stop_requested(); }));
    if (target->started_pid > 0 && !st.quiet) {
      std::fprintf(stderr, "kvprof: launched (pid %d): %s\n", target->started_pid,
                   redact_secrets(target->launch_command).c_str());
    }
    if (target->memory_warn && !st.quiet)
      std::fprintf(stderr, "kvprof: warning: %s\n", target->memory_note.c_str());
    st.run.endpoint = target->endpoint;
    deps.memory_source = target->memory_name;
    deps.memory_note = target->memory_note;
    if (simulate) {
      st.run.model = spec.sim.model;
      if (st.estimate_with.empty() && !st.sim_num_gpu_blocks) {
        if (auto sized = value_or_fatal(sim::estimate_for_sim(spec.sim))) {
          limits.start = estimated_start(*sized, uint64_t{st.input_len} + st.output_len);
          limits.start_source = "the plan that sized the simulator";
        }
      }
    }
  }
  if (!st.estimate_with.empty()) {
    EstimateOptions defaults;
    if (!st.run.model.empty()) defaults.model = st.run.model;
    auto input = value_or_fatal(parse_estimate_flags(st.estimate_with, defaults));
    plan = value_or_fatal(engines::plan(input));
    limits.start = estimated_start(*plan, uint64_t{st.input_len} + st.output_len);
    limits.start_source = "kvprof estimate " + st.estimate_with;
  } else if (target && target->kind == run::TargetKind::launch) {
    // The plan of the launched server, read from its command.
    workload::GridOptions grid;
    grid.input_lens = {st.input_len};
    grid.output_lens = {st.output_len};
    grid.concurrencies = {1};
    if (auto lp = profile::plan_from_launch(target->launch_command, grid, target->memory, 0)) {
      limits.start = estimated_start(lp->estimate, uint64_t{st.input_len} + st.output_len);
      limits.start_source = "kvprof's plan of " + lp->flags;
    } else if (!st.quiet) {
      std::fprintf(stderr, "kvprof: note: no plan to start from: %s (give --estimate-with)\n",
                   lp.error().message.c_str());
    }
  }
  if (st.start) {
    limits.start = st.start;
    limits.start_source = "--start";
  }

  sys::install_stop_handlers();
  deps.should_stop = [] { return sys::stop_requested(); };
  // Progress: each trial's live status, a line per trial with the ETA of the trials left at
  // most (from the trials done and the time they took).
  std::unique_ptr<report::text::ProgressLine> progress;
  if (!st.quiet) progress = report::text::stderr_progress(st.no_color);
  const uint32_t step_bound =
      experiment::find_max_step_bound(limits.min_concurrency, limits.max_concurrency);
  const auto started = std::chrono::steady_clock::now();
  uint32_t steps_done = 0;
  std::function<void(const std::string&)> on_status;
  if (progress) {
    on_status = [&](const std::string& line) {
      progress->status(
          fmt::format("trial {} (of at most {}): {}", steps_done + 1, step_bound, line));
    };
  }
  experiment::Trial trial;
  if (in_process) {
    bench_trial->on_status = on_status;
    trial = experiment::make_bench_trial(std::move(*bench_trial));
  } else {
    experiment::ProfileTrialSettings ts;
    ts.run = value_or_fatal(client::resolve(st.run));
    ts.output_dir = dir;
    ts.input_len = st.input_len;
    ts.output_len = st.output_len;
    ts.waves = std::max(1U, st.waves);
    deps.memory = target->memory;
    deps.on_status = on_status;
    trial = experiment::make_profile_trial(ts, deps);
  }
  const auto on_step = [&](const experiment::FindMaxStep& s) {
    ++steps_done;
    if (!progress) return;
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const auto eta = report::text::eta_s(steps_done, step_bound, elapsed_s);
    progress->line(fmt::format("{}; at most {} more trial(s), ETA <= {}",
                               experiment::find_max_step_text(s),
                               step_bound - std::min(step_bound, steps_done),
                               eta ? report::text::short_duration(*eta) : "-"));
  };
  auto result = experiment::find_max(limits, trial, on_step, [] { return sys::stop_requested(); });
  progress.reset();  // the status line ends before the answer
  if (target) target->stop();
  if (!result) throw Fatal(result.error());
  nlohmann::json j = experiment::find_max_json(*result);
  j["run_id"] = run_id;
  j["run_dir"] = dir.string();
  j["endpoint"] = in_process ? "(llama.cpp in-process)"
                  : simulate ? "(built-in simulator)"
                             : st.run.endpoint;
  j["in_process"] = in_process;
  j["launch"] = st.launch.command;
  j["simulated"] = simulate;
  if (auto ok = profile::write_json_file(dir / "find_max.json", j); !ok) throw Fatal(ok.error());
  emit(st.out, j, experiment::find_max_text(*result) + "results: " + dir.string() + "\n");
  if (!st.no_report) report_experiment_folder(dir, st.out.json);
  if (result->interrupted) {
    throw Fatal({ErrorKind::interrupted, "interrupted; the steps so far are in " + dir.string()});
  }
  if (!result->answer) {
    throw Fatal({ErrorKind::network, fmt::format("no concurrency in {}..{} passes",
                                                 st.min_concurrency, st.max_concurrency)});
  }
}

}  // namespace

void register_find_max_command(CLI::App& app) {
  auto st = std::make_shared<FindMaxState>();
  st->run.endpoint.clear();
  auto* cmd = app.add_subcommand(
      "find-max",
      "Find the largest concurrency that runs with no errors, no preemption or queueing, memory "
      "under a limit and the latency SLOs met: starts from the estimate's answer, brackets, then "
      "bisects (at most log2(range)+3 steps); every step is a run folder in results/<run_id>/");
  st->cmd = cmd;
  client::add_run_options(cmd, st->run);
  cmd->get_option("--endpoint")
      ->description(
          "Server base URL; default: llama.cpp in-process for a --model X.gguf, else the "
          "built-in SIMULATED server");
  cmd->get_option("--model")->description(
      "Model name sent in each request; a .gguf file runs llama.cpp in-process (each step a "
      "`kvprof bench` run of one condition in one context of -c cells)");
  cmd->add_option("--input-len", st->input_len, "Prompt tokens per request")->required();
  cmd->add_option("--output-len", st->output_len, "Generated tokens per request")->required();
  cmd->add_option("--slo-ttft-ms", st->slo_ttft_ms, "p99 time-to-first-token limit, ms");
  cmd->add_option("--slo-itl-ms", st->slo_itl_ms, "p99 inter-token latency limit, ms");
  cmd->add_option("--max-memory-frac", st->max_memory_frac,
                  "Peak GPU memory used / total must stay at or under this (e.g. 0.95); "
                  "in-process on the CPU: the engine's peak RSS / this machine's RAM");
  cmd->add_option("--min-concurrency", st->min_concurrency, "Low end of the search")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", st->max_concurrency, "High end of the search")
      ->capture_default_str();
  cmd->add_option("--estimate-with", st->estimate_with,
                  "Start from the plan for these engine flags (its max concurrency at input + "
                  "output tokens), e.g. \"--model X --gpu H100 --max-num-seqs 64\"");
  cmd->add_option("--start", st->start, "Start here instead of at the estimate's answer");
  cmd->add_option("--waves", st->waves,
                  "Requests per step = waves x concurrency (servers; in-process: one)")
      ->capture_default_str();
  add_launch_options(cmd, st->launch,
                     "Start this server command once for all steps ({model}, {port}, {host}, "
                     "{max_concurrency}); its output goes to server.log; stopped at the end");
  add_container_option(cmd, st->launch);
  st->bench_group = add_bench_engine_options(cmd, st->bench, st->bench_flags,
                                             "llama.cpp in-process (--model X.gguf; -c required)");
  st->bench_group->get_option("--ctx-size")
      ->description("KV cells of the one context every step runs in (required)");
  auto* simg = cmd->add_option_group("built-in simulator (no --endpoint or --launch)");
  simg->add_option("--sim-gpu", st->sim_gpu, "Catalog GPU the simulator pretends to be")
      ->capture_default_str();
  simg->add_option("--sim-num-gpu-blocks", st->sim_num_gpu_blocks, "KV blocks of the simulator");
  simg->add_option("--sim-max-num-seqs", st->sim_max_num_seqs, "Its max_num_seqs");
  simg->add_option("--sim-tokens-per-s", st->sim_tokens_per_s, "Its decode speed");
  cmd->add_option("--output-dir", st->output_dir, "Where results/<run_id>/ goes")
      ->envname("KVPROF_OUTPUT_DIR")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", st->quiet, "No progress lines on stderr");
  cmd->add_flag("--no-report", st->no_report,
                "Do not write report.html (the steps, the answer, every step's run) into the "
                "search's folder");
  cmd->add_flag("--no-color", st->no_color, "No colour in the progress (also: NO_COLOR=1)");
  add_output_options(cmd, st->out);
  cmd->callback([st] { run_find_max(*st); });
}

}  // namespace kvprof::cli
