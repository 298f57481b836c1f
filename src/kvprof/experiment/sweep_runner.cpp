// The sweep's run loop (see sweep_runner.hpp).
#include "kvprof/experiment/sweep_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "kvprof/experiment/sweep_summary.hpp"
#include "kvprof/profile/launcher.hpp"
#include "kvprof/profile/profiler.hpp"
#include "kvprof/results/history_entries.hpp"
#include "kvprof/results/run_folder.hpp"
#include "kvprof/run/container.hpp"
#include "kvprof/run/target.hpp"
#include "kvprof/util/clock.hpp"
#include "kvprof/util/units.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::experiment {

namespace fs = std::filesystem;

namespace {

nlohmann::json configuration_json(const PlannedConfig& pc, const std::string& sweep) {
  const ModelEntry& e = pc.entry;
  nlohmann::json j = {{"sweep", sweep},
                      {"configuration", pc.id},
                      {"model_id", e.model_id},
                      {"input_lengths", e.input_lengths},
                      {"output_lengths", e.output_lengths},
                      {"batch_sizes", e.batch_sizes},
                      {"dtype", e.dtype},
                      {"tensor_parallel_size", e.tensor_parallel_size},
                      {"pipeline_parallel_size", e.pipeline_parallel_size},
                      {"quantization", e.quantization},
                      {"kv_cache_dtype", e.kv_cache_dtype},
                      {"engine", pc.engine},
                      {"gpu", pc.gpu},
                      {"server", server_kind_name(pc.server)},
                      {"launch", e.launch},
                      {"endpoint", e.endpoint}};
  if (!e.container_name.empty()) j["container_name"] = e.container_name;
  j["gpu_memory_utilization"] =
      e.gpu_memory_utilization ? nlohmann::json(*e.gpu_memory_utilization) : nlohmann::json();
  j["max_model_len"] = e.max_model_len ? nlohmann::json(*e.max_model_len) : nlohmann::json();
  return j;
}

// The simulator playing a configuration: one GPU of its tensor-parallel group, sized by the
// configuration's own plan (its KV cache dtype, TP and quantization included) when there is one.
sim::SimFlags sim_flags(const PlannedConfig& pc) {
  sim::SimFlags flags;
  flags.model = pc.entry.model_id;
  flags.gpu = pc.gpu;
  flags.port = 0;
  if (pc.entry.max_model_len) flags.max_model_len = static_cast<uint32_t>(*pc.entry.max_model_len);
  flags.gpu_memory_utilization = pc.entry.gpu_memory_utilization;
  flags.tensor_parallel_size = pc.entry.tensor_parallel_size;
  if (pc.estimate && pc.estimate->engine_report.num_gpu_blocks > 0) {
    const auto& report = pc.estimate->engine_report;
    flags.num_gpu_blocks = static_cast<uint32_t>(report.num_gpu_blocks);
    flags.block_size = report.block_size;
    flags.kv_bytes_per_block = pc.estimate->per_gpu.kv_cache_bytes / report.num_gpu_blocks;
    flags.weights_bytes = pc.estimate->per_gpu.weights_bytes;
  }
  return flags;
}

struct RunContext {
  const SweepConfig& config;
  const SweepOptions& options;
  const SweepDeps& deps;
  std::function<void(const std::string&)> on_status;  // the profile's status; null: none
  std::function<void(const std::string&, double)> on_condition_end;  // each condition run
};

// Whether every condition of `grid` is in `measured`.
bool all_measured(const workload::GridOptions& grid, const std::set<std::string>& measured) {
  for (const uint32_t in : grid.input_lens) {
    for (const uint32_t out : grid.output_lens) {
      for (const uint32_t c : grid.concurrencies) {
        for (const auto mode : grid.prefix_modes) {
          if (!measured.contains(workload::condition_id(in, out, c, mode))) return false;
        }
      }
    }
  }
  return true;
}

// One configuration as one profile run; fills `rec` (status, reason, run, figures).
void run_one(const RunContext& ctx, const PlannedConfig& pc, ConfigRecord& rec) {
  const SweepSettings& s = ctx.config.settings;
  profile::ProfileConfig config;
  config.grid = pc.grid;
  // Empty: the name the launched server gives its model file.
  config.run.model = pc.server_names_model ? std::string() : pc.entry.model_id;
  config.output_dir = ctx.options.output_dir;
  config.run_tag = pc.id;
  config.baseline_s = s.baseline_s;
  config.post_warmup_s = s.post_warmup_s;
  config.warmup_requests = s.warmup_requests;
  config.min_condition_s = min_condition_s(s, pc.server);
  config.metrics_interval_ms = 0;  // automatic: from min_condition_s
  config.estimate = pc.estimate;
  config.estimate_flags = fmt::format("sweep '{}' configuration {} ({} on {})",
                                      ctx.config.settings.name, pc.id, pc.label, pc.gpu);
  config.configuration = configuration_json(pc, s.name);
  // The simulator's memory is its own; a real server's is sampled on the GPUs given (a job's).
  if (pc.server != ServerKind::simulator) config.gpus = ctx.options.gpus;
  // A configuration interrupted (or failed) before runs only the conditions it had not finished.
  config.skip_conditions = rec.completed_conditions();
  if (config.skip_conditions.empty()) {
    rec.runs.clear();
    rec.conditions.clear();
    rec.figures = {};
  } else {
    config.configuration["resumed"] = {
        {"conditions_measured_before", config.skip_conditions.size()},
        {"earlier_run_id", rec.run_id}};
  }
  const size_t n_earlier = config.skip_conditions.size();
  // Stopped after its last condition: nothing is left to run, the conditions decide.
  if (n_earlier > 0 && all_measured(pc.grid, config.skip_conditions)) {
    uint64_t n_ok = 0, n_errors = 0;
    for (const auto& [cid, c] : rec.conditions) {
      n_ok += static_cast<uint64_t>(c.n_ok.value_or(0));
      n_errors += static_cast<uint64_t>(c.n_errors.value_or(0));
    }
    rec.status = n_errors > 0 ? "partial" : "done";
    rec.reason = n_errors > 0 ? fmt::format(
                                    "{} of {} requests failed (conditions measured by "
                                    "earlier runs)",
                                    n_errors, n_ok + n_errors)
                              : "";
    return;
  }
  // The configuration's server: launched, at its endpoint, or the simulator sized by its plan.
  run::TargetSpec spec;
  spec.kind = pc.server == ServerKind::launch     ? run::TargetKind::launch
              : pc.server == ServerKind::endpoint ? run::TargetKind::endpoint
                                                  : run::TargetKind::simulator;
  if (pc.server == ServerKind::endpoint) spec.endpoint = pc.entry.endpoint;
  const auto failed = [&](const Error& err) {
    rec.status = err.kind == ErrorKind::interrupted ? "interrupted" : "failed";
    rec.reason = err.message;
  };
  if (!pc.entry.container_name.empty()) {  // where the container's engine listens, asked now
    auto container = run::inspect_container(pc.entry.container_name);
    if (!container) return failed(container.error());
    spec.endpoint = container->endpoint();
    ctx.deps.say(fmt::format("{}: container {} ({}) at {}", pc.id, container->name,
                             container->image, spec.endpoint));
  }
  spec.launch.ready_timeout_s = s.launch_timeout_s;
  spec.launch.grace_s = s.launch_grace_s;
  spec.launch.fill = [&pc](const std::string& host, uint16_t port) {
    return launch_command(pc.entry, pc.gpu, host, port);
  };
  spec.held_memory = ctx.deps.memory;
  spec.held_memory_name = ctx.deps.memory_source;
  spec.held_memory_note = ctx.deps.memory_note;
  spec.sim = sim_flags(pc);
  if (spec.sim.num_gpu_blocks) {
    spec.sim_sizing =
        fmt::format("kvprof's plan of configuration {} ({} on {})", pc.id, pc.label, pc.gpu);
  }
  auto target = run::open_target(spec, ctx.deps.should_stop);
  if (!target) return failed(target.error());
  config.run.endpoint = (*target)->endpoint;
  config.launch = (*target)->launch;
  config.simulation = (*target)->simulation;
  profile::ProfileDeps deps;
  deps.memory = (*target)->memory;
  deps.memory_source = (*target)->memory_name;
  deps.memory_note = (*target)->memory_note;
  deps.should_stop = ctx.deps.should_stop;
  deps.on_progress = ctx.deps.on_run_progress;
  deps.on_status = ctx.on_status;
  deps.on_condition_end = ctx.on_condition_end;
  auto outcome = profile::run_profile(config, deps);
  (*target)->stop();
  if (!outcome) return failed(outcome.error());
  auto run = results::read_run_summary(outcome->summary, {}, outcome->run_dir);
  if (!run) return failed(run.error());
  take_run(*run, {outcome->run_dir.filename().string(), outcome->run_dir.string()}, rec);
  if (ctx.options.record_runs)
    results::record_or_warn(ctx.options.output_dir, results::history_entry(*run, s.name));
  auto t = outcome->totals;
  // Conditions measured by earlier runs count with this run's.
  for (const auto& [cid, c] : rec.conditions) {
    if (n_earlier == 0 || size_t{c.run} + 1 == rec.runs.size()) continue;
    const auto ok = static_cast<uint64_t>(c.n_ok.value_or(0));
    const auto errors = static_cast<uint64_t>(c.n_errors.value_or(0));
    t.n_ok += ok;
    t.n_errors += errors;
    t.n_requests += ok + errors;
  }
  const std::string earlier =
      n_earlier > 0 ? fmt::format(" ({} conditions measured by earlier runs)", n_earlier) : "";
  if (outcome->interrupted) {
    rec.status = "interrupted";
    rec.reason = "interrupted; " + profile::request_totals_text(outcome->totals) + earlier;
  } else if (t.n_ok == 0) {
    rec.status = "failed";
    rec.reason = "no request succeeded (see request_trace.csv)";
  } else if (t.n_errors > 0) {
    rec.status = "partial";
    rec.reason = fmt::format("{} of {} requests failed{}", t.n_errors, t.n_requests, earlier);
  } else {
    rec.status = "done";
    rec.reason.clear();
  }
}

}  // namespace

const std::string k_no_configuration;

Take take_configuration(const PlannedConfig& pc, const std::string& head,
                        const SweepOptions& options, const SweepDeps& deps, SweepState& state,
                        SweepOutcome& out) {
  ConfigRecord& rec = state.records[pc.fingerprint];
  rec.fingerprint = pc.fingerprint;
  rec.id = pc.id;
  rec.label = pc.label;
  rec.expected_s = pc.expected_s;
  if (rec.finished()) {
    ++out.n_already;
    deps.say(fmt::format("{}: already {} (run {}), skipped", head, rec.status, rec.run_id));
    return Take::already_finished;
  }
  if (!pc.fits && !options.run_unfit) {
    rec.status = "skipped";
    rec.reason = "will not fit: " + pc.reason;
    ++out.n_skipped;
    deps.say(fmt::format("{}: skipped, {}", head, rec.reason));
    return Take::skipped_unfit;
  }
  return Take::run;
}

void run_configuration(const SweepConfig& config, const PlannedConfig& pc,
                       const SweepOptions& options, const SweepDeps& deps, ConfigRecord& rec) {
  run_one(RunContext{config, options, deps, nullptr, nullptr}, pc, rec);
}

void record_sweep(const SweepOptions& options, const fs::path& dir) {
  auto sweep = results::read_json_file(dir / "sweep.json");
  auto entry = sweep ? results::sweep_entry(*sweep, dir) : std::unexpected(sweep.error());
  if (!entry) {
    std::fprintf(stderr, "kvprof: warning: the history was not updated (%s)\n",
                 entry.error().message.c_str());
    return;
  }
  results::record_or_warn(options.output_dir, *entry);
}

double sweep_eta_s(const EtaInputs& in) {
  const double expected_done = in.expected_ran_s + in.condition_expected_s;
  const double actual_done = in.actual_ran_s + in.condition_actual_s;
  if (in.condition_expected_s <= 0 || expected_done <= 0) {
    // No condition of this configuration ended yet: the plan (rescaled by the configurations
    // done), less what this one has used.
    const double scale = in.expected_ran_s > 0 ? in.actual_ran_s / in.expected_ran_s : 1.0;
    return std::max(0.0, in.expected_left_s * scale - in.running_elapsed_s);
  }
  const double scale = actual_done / expected_done;
  return std::max(0.0, (in.expected_left_s - in.condition_expected_s) * scale);
}

fs::path sweep_dir(const fs::path& output_dir, const std::string& name) {
  return output_dir / "sweeps" / name;
}

Expected<OpenSweep> open_sweep(const SweepConfig& config, const SweepOptions& options) {
  OpenSweep open;
  open.dir = sweep_dir(options.output_dir, config.settings.name);
  auto lock = SweepLock::acquire(open.dir);
  if (!lock) return std::unexpected(lock.error());
  open.lock = std::move(*lock);
  auto loaded = load_state(open.dir);
  if (!loaded) return std::unexpected(loaded.error());
  open.state = std::move(*loaded);
  open.state.name = config.settings.name;
  open.state.config_file = options.config_file;
  if (open.state.first_started_unix_s == 0) open.state.first_started_unix_s = unix_now_s();
  return open;
}

Expected<void> close_sweep(const Plan& plan, const SweepOptions& options, const SweepState& state,
                           const SweepOutcome& out, const std::string* fingerprint) {
  const std::string status = out.interrupted    ? "interrupted"
                             : out.n_failed > 0 ? "completed_with_failures"
                                                : "completed";
  if (auto r = save_state(out.dir, state, fingerprint); !r) return r;
  if (auto r = write_sweep_files(out.dir, plan, state, options.config_file, status); !r) return r;
  record_sweep(options, out.dir);
  return {};
}

Expected<SweepOutcome> run_sweep(const SweepConfig& config, const Plan& plan,
                                 const SweepOptions& options, const SweepDeps& deps) {
  auto open = open_sweep(config, options);
  if (!open) return std::unexpected(open.error());
  SweepOutcome out;
  out.dir = open->dir;
  SweepState& state = open->state;

  const size_t n = plan.configs.size();
  double expected_left = 0;
  for (const auto& pc : plan.configs) {
    const auto it = state.records.find(pc.fingerprint);
    const bool finished = it != state.records.end() && it->second.finished();
    if (!finished && (pc.fits || options.run_unfit)) expected_left += pc.expected_s;
  }
  double expected_ran = 0, actual_ran = 0;
  // The state with the conditions file of `fingerprint`'s configuration only: the others are as
  // loaded or as saved when they ended (none matches the empty one).
  const auto save = [&](const std::string& status,
                        const std::string& fingerprint) -> Expected<void> {
    if (auto r = save_state(out.dir, state, &fingerprint); !r) return r;
    return write_sweep_files(out.dir, plan, state, options.config_file, status);
  };
  if (auto r = save("running", k_no_configuration); !r) return std::unexpected(r.error());
  const std::string* last_run = &k_no_configuration;  // its conditions are saved at the end

  for (size_t i = 0; i < n; ++i) {
    const PlannedConfig& pc = plan.configs[i];
    const std::string head = fmt::format("[{}/{}] {}", i + 1, n, pc.label);
    ConfigRecord& rec = state.records[pc.fingerprint];
    if (const Take take = take_configuration(pc, head, options, deps, state, out);
        take != Take::run) {
      if (take == Take::skipped_unfit) {
        if (auto r = save("running", pc.fingerprint); !r) return std::unexpected(r.error());
      }
      continue;
    }
    if (deps.should_stop && deps.should_stop()) {
      out.interrupted = true;
      break;
    }
    // The remaining time, scaled by how the runs so far compared with their plan.
    const double scale = expected_ran > 0 ? actual_ran / expected_ran : 1.0;
    const size_t n_before = rec.completed_conditions().size();
    deps.say(fmt::format(
        "{}: starting ({} conditions{}, expected {}; sweep ETA {})", head, pc.conditions.size(),
        n_before > 0 ? fmt::format(", {} measured before by run {}", n_before, rec.run_id) : "",
        format_duration(pc.expected_s * scale), format_duration(expected_left * scale)));
    rec.attempts += 1;
    rec.started_unix_s = unix_now_s();
    // The run's live status, with the sweep's ETA from the pace of its conditions so far.
    EtaInputs eta{expected_left, expected_ran, actual_ran, 0, 0, pc.expected_s, 0};
    std::map<std::string, double> expected_of;  // condition id -> the plan's seconds
    for (const auto& c : pc.conditions) {
      expected_of[workload::condition_id(c.input_len, c.output_len, c.batch_size,
                                         workload::PrefixMode::low)] = c.expected_s;
    }
    const auto on_condition_end = [&](const std::string& cid, double seconds) {
      if (const auto it = expected_of.find(cid); it != expected_of.end()) {
        eta.condition_expected_s += it->second;
        eta.condition_actual_s += seconds;
      }
    };
    std::function<void(const std::string&)> on_status;
    if (deps.on_run_status) {
      on_status = [&deps, &eta, head, start_s = rec.started_unix_s](const std::string& line) {
        eta.running_elapsed_s = unix_now_s() - start_s;
        deps.on_run_status(
            fmt::format("{}: {}; sweep ETA {}", head, line, format_duration(sweep_eta_s(eta))));
      };
    }
    run_one(RunContext{config, options, deps, on_status, on_condition_end}, pc, rec);
    last_run = &pc.fingerprint;
    rec.ended_unix_s = unix_now_s();
    rec.duration_s = rec.ended_unix_s - rec.started_unix_s;
    ++out.n_ran;
    expected_left = std::max(0.0, expected_left - pc.expected_s);
    expected_ran += pc.expected_s;
    actual_ran += rec.duration_s;
    if (rec.status == "done") ++out.n_done;
    if (rec.status == "partial") ++out.n_partial;
    if (rec.status == "failed") {
      ++out.n_failed;
      out.failures.push_back(fmt::format("{}: {}", pc.id, rec.reason));
    }
    const auto& peak = rec.figures.peak_used_bytes;
    deps.say(fmt::format("{}: {} in {}{}{}", head, rec.status, format_duration(rec.duration_s),
                         rec.run_id.empty() ? "" : ", run " + rec.run_id,
                         peak ? fmt::format(", peak {:.2f} GiB", bytes_to_gib(*peak))
                              : (rec.reason.empty() ? "" : ": " + rec.reason)));
    if (rec.status == "interrupted") {
      out.interrupted = true;
      break;
    }
    if (auto r = save("running", pc.fingerprint); !r) return std::unexpected(r.error());
  }
  // The last configuration's conditions file with the state and files of the sweep's ending.
  if (auto r = close_sweep(plan, options, state, out, last_run); !r)
    return std::unexpected(r.error());
  return out;
}

}  // namespace kvprof::experiment
