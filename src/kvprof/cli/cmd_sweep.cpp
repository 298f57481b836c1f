// `kvprof sweep --config FILE.yaml [--dry-run]`: checks the whole batch-profiling file (every
// problem with its line), plans each configuration (memory, fit, time), then runs each as a profile
// run — resuming a sweep that was stopped — into sweep.json and sweep_summary.csv.
#include <fmt/format.h>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/estimate_options.hpp"
#include "kvprof/cli/run_report.hpp"
#include "kvprof/experiment/sweep_cluster.hpp"
#include "kvprof/experiment/sweep_config.hpp"
#include "kvprof/experiment/sweep_job.hpp"
#include "kvprof/experiment/sweep_plan.hpp"
#include "kvprof/experiment/sweep_runner.hpp"
#include "kvprof/experiment/sweep_status.hpp"
#include "kvprof/experiment/sweep_summary.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/gpu/nvml.hpp"
#include "kvprof/report/text/progress_line.hpp"
#include "kvprof/scheduler/kubernetes.hpp"
#include "kvprof/scheduler/slurm.hpp"
#include "kvprof/sys/signals.hpp"
#include "kvprof/util/atomic_file.hpp"
#include "kvprof/util/json_text.hpp"

namespace kvprof::cli {

namespace {

namespace fs = std::filesystem;

struct SweepCliState {
  std::string config;
  bool dry_run = false;
  bool status = false;
  bool json = false;
  bool quiet = false;
  bool no_color = false;
  bool run_unfit = false;
  bool verbose = false;
  bool no_report = false;
  std::string output_dir = "results";
  std::string name;
  // On a cluster.
  std::string executor = "local";
  scheduler::SlurmOptions slurm;
  std::string kvprof_path;
  std::string on_interrupt = "ask";
  double poll_s = 5;
  unsigned gpus_per_node = 8;
  std::string job;  // inside a job: the configuration to run
  scheduler::KubernetesOptions k8s;
};

// The cluster's scheduler for --executor; null for `local` and for Kubernetes' dry run (its
// manifests are Indexed Jobs for kubectl apply, written without kubectl).
std::unique_ptr<scheduler::JobScheduler> open_scheduler(const SweepCliState& st) {
  if (st.executor == "local") return nullptr;
  if (st.executor == "kubernetes") {
    if (st.dry_run) return nullptr;
    return value_or_fatal(scheduler::KubernetesScheduler::open(st.k8s));
  }
  return value_or_fatal(scheduler::SlurmScheduler::open(st.slurm));
}

experiment::ClusterOptions cluster_options(const SweepCliState& st) {
  experiment::ClusterOptions c;
  std::error_code ec;
  c.kvprof_path = st.kvprof_path.empty() ? fs::read_symlink("/proc/self/exe", ec)
                                         : fs::absolute(st.kvprof_path);
  // A pod's kvprof is inside its image: only a Slurm node's is a path here.
  if (st.executor == "slurm" && !fs::is_regular_file(c.kvprof_path, ec)) {
    throw Fatal({ErrorKind::usage,
                 fmt::format("--kvprof-path {}: not a file; give the kvprof that the cluster's "
                             "nodes can run",
                             c.kvprof_path.string())});
  }
  c.config_file = fs::absolute(st.config);
  c.poll_interval = std::chrono::milliseconds(static_cast<int64_t>(st.poll_s * 1000));
  c.gpus_per_node = st.gpus_per_node;
  return c;
}

// The configurations a cluster sweep would submit now: not finished, and fitting (or --force).
std::vector<const experiment::PlannedConfig*> to_submit(const experiment::Plan& plan,
                                                        const experiment::SweepState& state,
                                                        bool run_unfit) {
  std::vector<const experiment::PlannedConfig*> out;
  for (const auto& pc : plan.configs) {
    const auto it = state.records.find(pc.fingerprint);
    const bool finished = it != state.records.end() && it->second.finished();
    if (!finished && (pc.fits || run_unfit)) out.push_back(&pc);
  }
  return out;
}

// The batch scripts a cluster sweep would submit: one per configuration not finished that fits.
void print_job_scripts(const experiment::SweepConfig& config, const experiment::Plan& plan,
                       const experiment::SweepState& state, const SweepCliState& st,
                       scheduler::JobScheduler& scheduler) {
  experiment::SweepOptions options;
  options.output_dir = st.output_dir;
  options.run_unfit = st.run_unfit;
  const auto cluster = cluster_options(st);
  const fs::path dir = experiment::sweep_dir(st.output_dir, config.settings.name);
  const auto configs = to_submit(plan, state, st.run_unfit);
  for (const auto* pc : configs) {
    const auto script = value_or_fatal(
        scheduler.batch_script(experiment::job_request(config, *pc, options, cluster)));
    std::printf(
        "\n# %s: %s (%s)\n%s", pc->id.c_str(),
        experiment::job_file(dir, pc->fingerprint, scheduler.script_suffix().c_str()).c_str(),
        pc->label.c_str(), script.c_str());
  }
  const size_t n = configs.size();
  std::printf("\ndry run: %zu %s job%s would be submitted; nothing was started\n", n,
              scheduler.name().c_str(), n == 1 ? "" : "s");
}

// `--executor kubernetes --dry-run`: the sweep's jobs as Indexed Job manifests, written beside
// the sweep's state for `kubectl apply -f`.
void write_kubernetes_manifests(const experiment::SweepConfig& config, const experiment::Plan& plan,
                                const experiment::SweepState& state, const SweepCliState& st) {
  experiment::SweepOptions options;
  options.output_dir = st.output_dir;
  options.run_unfit = st.run_unfit;
  const auto cluster = cluster_options(st);
  std::vector<scheduler::JobRequest> requests;
  for (const auto* pc : to_submit(plan, state, st.run_unfit))
    requests.push_back(experiment::job_request(config, *pc, options, cluster));
  auto k8s = st.k8s;
  k8s.name = config.settings.name;
  const auto text = value_or_fatal(scheduler::kubernetes_manifests(requests, k8s));
  const fs::path path =
      experiment::sweep_dir(st.output_dir, config.settings.name) / "kubernetes.yaml";
  // The jobs' logs and results go to jobs/ on the volume: it exists before the first pod.
  std::error_code ec;
  fs::create_directories(path.parent_path() / "jobs", ec);
  value_or_fatal(write_file_atomically(path, text));
  std::printf(
      "\ndry run: %zu configuration%s as Kubernetes Indexed Jobs in %s (kubectl apply -f "
      "it; each pod writes its run folder on the volume, `kvprof runs` indexes them)\n",
      requests.size(), requests.size() == 1 ? "" : "s", path.c_str());
}

// Asks at Ctrl-C whether to cancel the jobs still queued or running (--on-interrupt ask, on a
// terminal); leaves them elsewhere.
bool ask_cancel(const std::string& mode, size_t n_jobs) {
  if (mode == "cancel") return true;
  if (mode == "leave" || ::isatty(STDIN_FILENO) == 0) return false;
  std::fprintf(stderr,
               "\n%zu job%s still queued or running. Cancel %s (scancel)? Otherwise they run on "
               "and a later run of this sweep collects them. [y/N] ",
               n_jobs, n_jobs == 1 ? "" : "s", n_jobs == 1 ? "it" : "them");
  char answer[16] = {};
  if (std::fgets(answer, sizeof answer, stdin) == nullptr) return false;
  return answer[0] == 'y' || answer[0] == 'Y';
}

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

// Inside a cluster job: runs configuration --job of the sweep and writes its result; the exit
// code says how it went (0 done, 3 partial or failed, 130 interrupted).
void run_job(const experiment::SweepConfig& config, const experiment::Plan& plan,
             const SweepCliState& st, gpu::MemorySource* memory, const std::string& memory_note) {
  experiment::SweepOptions options;
  options.output_dir = st.output_dir;
  options.config_file = st.config;
  options.run_unfit = st.run_unfit;
  experiment::SweepDeps deps;
  deps.memory = memory;
  deps.memory_source = memory != nullptr ? "nvml" : "none";
  deps.memory_note = memory_note;
  sys::install_stop_handlers();
  deps.should_stop = [] { return sys::stop_requested(); };
  // What the job says of its configuration goes to the job's log.
  deps.on_progress = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  const auto r = value_or_fatal(experiment::run_sweep_job(config, plan, options, deps, st.job));
  std::printf("configuration %s: %s%s%s\n", st.job.c_str(), r.status.c_str(),
              r.run_dir.empty() ? "" : ", run folder ", r.run_dir.c_str());
  if (!r.reason.empty()) std::printf("  %s\n", r.reason.c_str());
  std::fflush(stdout);
  if (r.status == "interrupted") throw Fatal({ErrorKind::interrupted, "the job was stopped"});
  if (r.status != "done") throw Fatal({ErrorKind::partial, "configuration " + r.status});
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
  auto scheduler = open_scheduler(st);
  if (st.status) {
    // Where each configuration stands; on a cluster, with what the scheduler says of its job.
    std::vector<scheduler::JobStatus> jobs;
    if (scheduler) {
      jobs = value_or_fatal(scheduler->list(experiment::job_name(config.settings.name, "")));
    }
    const auto statuses = experiment::sweep_status(plan, state, config.settings.name, jobs);
    if (st.json) {
      std::printf("%s\n", json_text(experiment::sweep_status_json(statuses), 2).c_str());
    } else {
      std::printf("sweep '%s' (%s):\n%s", config.settings.name.c_str(), dir.c_str(),
                  experiment::sweep_status_text(statuses).c_str());
    }
    return;
  }
  if (st.dry_run) {
    if (st.json) {
      std::printf("%s\n", json_text(experiment::plan_json(plan, state), 2).c_str());
    } else {
      std::fputs(experiment::plan_text(plan, state).c_str(), stdout);
      if (scheduler) {
        print_job_scripts(config, plan, state, st, *scheduler);
      } else if (st.executor == "kubernetes") {
        write_kubernetes_manifests(config, plan, state, st);
      } else {
        std::printf("\ndry run: nothing was started; results would go to %s\n", dir.c_str());
      }
    }
    return;
  }
  if (!st.job.empty()) {
    run_job(config, plan, st, memory.get(), memory_note);
    return;
  }
  if (st.executor == "kubernetes") {
    // The pods see the results folder and the sweep file only on the claim: refused before
    // anything is submitted.
    scheduler::JobRequest files;
    files.shared_paths = {fs::absolute(st.config), fs::absolute(st.output_dir)};
    value_or_fatal(scheduler::check_on_volume(files, st.k8s));
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
  experiment::ClusterDeps cluster_deps;
  cluster_deps.cancel_on_interrupt = [&](size_t n_jobs) {
    if (progress) progress->finish();  // the question stands on its own line
    return ask_cancel(st.on_interrupt, n_jobs);
  };
  const auto out = value_or_fatal(
      scheduler ? experiment::run_sweep_on_cluster(config, plan, options, cluster_options(st),
                                                   *scheduler, deps, cluster_deps)
                : experiment::run_sweep(config, plan, options, deps));
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
  cmd->add_flag("--status", st->status,
                "Where each configuration stands: done, failed, not run, and on a cluster its "
                "job queued or running (with --executor slurm or kubernetes); start nothing")
      ->excludes("--dry-run");
  cmd->add_flag("--json", st->json, "Print the plan (--dry-run) or sweep.json as JSON");
  cmd->add_option("--output-dir", st->output_dir, "Where the run folders and sweeps/ go")
      ->envname("KVPROF_OUTPUT_DIR")
      ->capture_default_str();
  cmd->add_option("--name", st->name,
                  "The sweep's name (default: the file's `name`, else its stem)");
  cmd->add_flag("--run-unfit,--force", st->run_unfit,
                "Also run (or submit) the configurations the plan says will not fit");
  cmd->add_option("--executor", st->executor,
                  "Where the configurations run: `local` (one after the other, here), `slurm` "
                  "(each one a Slurm batch job asking for its GPUs; the results folder and the "
                  "sweep file must be on storage the cluster's nodes share) or `kubernetes` (each "
                  "one a Job of one pod through kubectl, the results folder and the sweep file on "
                  "a PersistentVolumeClaim; with --dry-run: Indexed Job manifests to kubectl "
                  "apply)")
      ->check(CLI::IsMember({"local", "slurm", "kubernetes"}))
      ->capture_default_str();
  auto* cluster = "Cluster (--executor slurm or kubernetes)";
  cmd->add_option("--partition,-p", st->slurm.partition, "Slurm partition of the jobs")
      ->group(cluster);
  cmd->add_option("--account,-A", st->slurm.account, "Slurm account the jobs are charged to")
      ->group(cluster);
  cmd->add_option("--time-limit", st->slurm.time_limit,
                  "Each job's time limit, in Slurm's forms: 30 (minutes), 1:00:00, 1-0")
      ->group(cluster);
  cmd->add_option("--sbatch-arg", st->slurm.sbatch_args,
                  "One more sbatch option for every job, as sbatch takes it (repeat the flag: "
                  "--sbatch-arg=--qos=high --sbatch-arg=--constraint=h100)")
      ->group(cluster);
  cmd->add_option("--gpus-per-node", st->gpus_per_node,
                  "GPUs of one node: a configuration needing more (tensor x pipeline parallel) "
                  "asks for several nodes, the same count on each, and each node's GPUs are "
                  "sampled into the run folder (nodes/<node>/)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str()
      ->group(cluster);
  cmd->add_option("--kvprof-path", st->kvprof_path,
                  "The kvprof the nodes run (default: this one, which must then be on shared "
                  "storage)")
      ->group(cluster);
  cmd->add_option("--on-interrupt", st->on_interrupt,
                  "At Ctrl-C, the jobs still queued or running: `ask` (on a terminal; else "
                  "leave), `cancel` (scancel, kubectl delete job), `leave` (a later run collects "
                  "them)")
      ->check(CLI::IsMember({"ask", "cancel", "leave"}))
      ->capture_default_str()
      ->group(cluster);
  cmd->add_option("--poll-s", st->poll_s, "Seconds between looks at the cluster's queue")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str()
      ->group(cluster);
  auto* k8s = "Kubernetes (--executor kubernetes)";
  cmd->add_option("--k8s-image", st->k8s.image, "Container image with kvprof in it")->group(k8s);
  cmd->add_option("--k8s-pvc", st->k8s.pvc,
                  "PersistentVolumeClaim holding the results folder and the sweep file")
      ->group(k8s);
  cmd->add_option("--k8s-mount-path", st->k8s.mount_path,
                  "Where the claim is mounted in the pods: the results folder and the sweep file "
                  "are under it, at the same paths as here")
      ->group(k8s);
  cmd->add_option("--k8s-namespace", st->k8s.name_space, "Namespace of the Jobs")->group(k8s);
  // What a job runs on its node; not for people.
  cmd->add_option("--job", st->job, "Run this configuration (fingerprint) here, as a job")
      ->group("");
  cmd->add_flag("-v,--verbose", st->verbose, "Also print each profile run's progress lines");
  cmd->add_flag("--no-report", st->no_report,
                "Do not write report.html (heatmaps per configuration, every run) into the "
                "sweep's folder");
  cmd->add_flag("-q,--quiet", st->quiet, "No plan and no progress lines");
  cmd->add_flag("--no-color", st->no_color, "No colour in the progress (also: NO_COLOR=1)");
  cmd->callback([st] { run_sweep_command(*st); });
}

}  // namespace kvprof::cli
