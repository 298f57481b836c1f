// `kvprof sweep --config FILE.yaml [--dry-run]`: checks the whole batch-profiling file (every
// problem with its line), plans each configuration (memory, fit, time), then runs each as a profile
// run — resuming a sweep that was stopped — into sweep.json and sweep_summary.csv.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/estimate_options.hpp"
#include "kvprof/cli/run_report.hpp"
#include "kvprof/experiment/sweep_config.hpp"
#include "kvprof/experiment/sweep_plan.hpp"
#include "kvprof/experiment/sweep_runner.hpp"
#include "kvprof/experiment/sweep_summary.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/gpu/nvml.hpp"
#include "kvprof/report/text/progress_line.hpp"
#include "kvprof/sys/signals.hpp"
#include "kvprof/util/json_text.hpp"

namespace kvprof::cli {

namespace {

namespace fs = std::filesystem;

struct SweepCliState {
  std::string config;
  bool dry_run = false;
  bool json = false;
  bool quiet = false;
  bool no_color = false;
  bool run_unfit = false;
  bool verbose = false;
  bool no_report = false;
  std::string output_dir = "results";
  std::string name;
};

// A sweep name from the file's stem: [A-Za-z0-9._-], nothing else.
std::string name_from_file(const std::string& file) {
  std::string out;
  for (const char c : fs::path(file).stem().string()) {
    out +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
  }
  if (out.empty() || out[0] == '.') out = "sweep" + out;
  return out.substr(0, 100);
}

void run_sweep_command(const SweepCliState& st) {
  auto parsed = value_or_fatal(experiment::load_sweep_config(st.config));
  auto& config = parsed.config;
  if (!st.name.empty()) config.settings.name = name_from_file(st.name + ".yaml");
  if (config.settings.name.empty()) config.settings.name = name_from_file(st.config);

  // The GPU entries without `gpu` are planned for: the one NVML sees, when the catalog has it.
  experiment::PlanOptions plan_options;
  plan_options.fallback_gpu = std::string(k_default_gpu);
  std::unique_ptr<gpu::MemorySource> memory;
  std::string memory_note;
  if (auto nvml = gpu::NvmlSource::open(); nvml) {
    memory = std::move(*nvml);
    if (auto d = memory->device_info(0); d && d->name) plan_options.gpu_found = *d->name;
  } else {
    memory_note = nvml.error().message;
  }
  std::vector<experiment::ConfigIssue> errors = parsed.errors;
  experiment::Plan plan;
  if (parsed.ok()) plan = experiment::plan_sweep(config, plan_options, errors);
  for (const auto& w : parsed.warnings)
    std::fprintf(stderr, "%s\n", experiment::format_issue(st.config, w, "warning").c_str());
  if (!errors.empty()) {
    for (const auto& e : errors)
      std::fprintf(stderr, "%s\n", experiment::format_issue(st.config, e).c_str());
    const size_t n = errors.size() + parsed.n_errors_dropped;
    throw Fatal({ErrorKind::input, fmt::format("{} problem{} in {} (listed above); nothing was run",
                                               n, n == 1 ? "" : "s", st.config)});
  }

  const fs::path dir = experiment::sweep_dir(st.output_dir, config.settings.name);
  const auto state = value_or_fatal(experiment::load_state(dir));
  if (st.dry_run) {
    if (st.json) {
      std::printf("%s\n", json_text(experiment::plan_json(plan, state), 2).c_str());
    } else {
      std::fputs(experiment::plan_text(plan, state).c_str(), stdout);
      std::printf("\ndry run: nothing was started; results would go to %s\n", dir.c_str());
    }
    return;
  }
  if (!st.json && !st.quiet) {
    std::fputs(experiment::plan_text(plan, state).c_str(), stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
  }

  experiment::SweepOptions options;
  options.output_dir = st.output_dir;
  options.config_file = st.config;
  options.run_unfit = st.run_unfit;
  experiment::SweepDeps deps;
  deps.memory = memory.get();
  deps.memory_source = memory ? "nvml" : "none";
  deps.memory_note = memory_note;
  sys::install_stop_handlers();
  deps.should_stop = [] { return sys::stop_requested(); };
  std::unique_ptr<report::text::ProgressLine> progress;
  if (!st.quiet) {
    progress = report::text::stderr_progress(st.no_color);
    deps.on_progress = [&progress](const std::string& line) {
      progress->line("sweep " + line, report::text::tone_of(line));
    };
    deps.on_run_status = [&progress](const std::string& line) { progress->status(line); };
  }
  if (st.verbose && progress) {
    deps.on_run_progress = [&progress](const std::string& line) {
      progress->line("  " + line, report::text::tone_of(line));
    };
  }
  const auto out = value_or_fatal(experiment::run_sweep(config, plan, options, deps));
  progress.reset();  // the status line ends before the summary
  if (st.json) {
    std::ifstream in(out.dir / "sweep.json");
    std::printf("%s", std::string(std::istreambuf_iterator<char>(in), {}).c_str());
  } else {
    std::printf(
        "sweep '%s': %zu ran now (%zu done, %zu partial, %zu failed), %zu finished before, %zu "
        "skipped; sweep.json and sweep_summary.csv in %s\n",
        config.settings.name.c_str(), out.n_ran, out.n_done, out.n_partial, out.n_failed,
        out.n_already, out.n_skipped, out.dir.c_str());
  }
  std::fflush(stdout);
  if (!st.no_report) report_experiment_folder(out.dir, st.json);
  if (out.interrupted) {
    throw Fatal({ErrorKind::interrupted,
                 fmt::format("sweep interrupted; run the same command again to finish the {} "
                             "configuration(s) left",
                             plan.configs.size() - out.n_already - out.n_done - out.n_partial -
                                 out.n_skipped)});
  }
  if (out.n_failed > 0) {
    throw Fatal({ErrorKind::partial,
                 fmt::format("{} configuration(s) failed: {}{}", out.n_failed, out.failures.front(),
                             out.n_failed > 1 ? " (others in sweep.json)" : "")});
  }
}

}  // namespace

void register_sweep_command(CLI::App& app) {
  auto st = std::make_shared<SweepCliState>();
  auto* cmd = app.add_subcommand(
      "sweep",
      "Profile every configuration of a batch-profiling YAML file (models x input lengths x "
      "output lengths x batch sizes, with their engine settings): the whole file is checked "
      "first, --dry-run prints the plan (runs, memory per GPU, what will not fit and why, the "
      "time), then each configuration is one profile run (its server launched and stopped when "
      "`launch` is given) into results/<run_id>/, with sweep.json and sweep_summary.csv under "
      "results/sweeps/<name>/, and report.html there. Running it again resumes: finished "
      "configurations are skipped. "
      "Exit codes: 0 ok, 2 a bad file, 3 some configurations failed, 130 interrupted");
  cmd->add_option("--config", st->config, "The sweep file (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_flag("--dry-run", st->dry_run, "Check the file and print the plan; start nothing");
  cmd->add_flag("--json", st->json, "Print the plan (--dry-run) or sweep.json as JSON");
  cmd->add_option("--output-dir", st->output_dir, "Where the run folders and sweeps/ go")
      ->envname("KVPROF_OUTPUT_DIR")
      ->capture_default_str();
  cmd->add_option("--name", st->name,
                  "The sweep's name (default: the file's `name`, else its stem)");
  cmd->add_flag("--run-unfit", st->run_unfit,
                "Also run the configurations the plan says will not fit");
  cmd->add_flag("-v,--verbose", st->verbose, "Also print each profile run's progress lines");
  cmd->add_flag("--no-report", st->no_report,
                "Do not write report.html (heatmaps per configuration, every run) into the "
                "sweep's folder");
  cmd->add_flag("-q,--quiet", st->quiet, "No plan and no progress lines");
  cmd->add_flag("--no-color", st->no_color, "No colour in the progress (also: NO_COLOR=1)");
  cmd->callback([st] { run_sweep_command(*st); });
}

}  // namespace kvprof::cli
