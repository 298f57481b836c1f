// `kvprof bench`: runs llama.cpp in-process (in a child process of kvprof) on a GGUF through a
// grid of concurrency x prompt length (or a short/long mix), measuring host memory at every
// step and, on a GPU machine, GPU memory through NVML, next to what llama.cpp reports.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>

#include "kvprof/bench/bench_estimate.hpp"
#include "kvprof/bench/bench_run.hpp"
#include "kvprof/bench/bench_summary.hpp"
#include "kvprof/cli/bench_options.hpp"
#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/estimate_options.hpp"
#include "kvprof/cli/run_report.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/report/text/progress_line.hpp"
#include "kvprof/report/text/table.hpp"
#include "kvprof/results/history_entries.hpp"
#include "kvprof/run/target.hpp"
#include "kvprof/sys/host_info.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::cli {
namespace {

// The status and lines `kvprof bench` shows as the worker's events come (ETA from the sequences
// done of all conditions and the time they took).
void show_bench_event(report::text::ProgressLine& progress, const bench::BenchReport& r,
                      const nlohmann::json& e, double elapsed_s) {
  uint64_t done = 0, total = 0;
  for (const auto& c : r.conditions) {
    done += c.requests.size();
    total += c.condition.concurrency;
  }
  const std::string ev = e.value("ev", "");
  const auto index = e.value(ev == "request" ? "condition" : "index", size_t{0});
  const std::string head = index < r.conditions.size()
                               ? fmt::format("[{}/{}] {}", index + 1, r.conditions.size(),
                                             r.conditions[index].condition.label)
                               : "";
  const std::string counts =
      fmt::format("{}/{} sequences, {}", done, total,
                  report::text::eta_text(report::text::eta_s(
                      static_cast<double>(done), static_cast<double>(total), elapsed_s)));
  if (ev == "phase") {
    progress.status(fmt::format("engine: {}", e.value("name", "")));
  } else if ((ev == "condition_start" || ev == "request") && !head.empty()) {
    progress.status(fmt::format("{}: running; {}", head, counts));
  } else if (ev == "condition_end" && !head.empty()) {
    const auto& c = r.conditions[index];
    progress.line(fmt::format("{}: {} in {:.0f} ms, peak RSS {}; {}", head,
                              c.finished ? "done" : "INTERRUPTED", c.wall_ms,
                              c.peak_rss_bytes ? format_bytes(*c.peak_rss_bytes) : "-", counts),
                  c.finished ? report::text::Tone::plain : report::text::Tone::warn);
  }
}

// --estimate-with FLAGS for a bench of `model_path`: the planner's input for llama.cpp's flags on
// the run's model, on the CPU when libllama has no GPU, else on the GPU NVML names (`gpu_name`).
bench::EstimateWith estimate_with(const std::string& flags, const std::string& model_path,
                                  const std::string& gpu_name) {
  bench::EstimateWith w;
  w.flags = flags;
  w.make_input = [flags, model_path, gpu_name](
                     bool has_gpu,
                     engines::AssumptionSources& src) -> Expected<estimate::EstimateInput> {
    EstimateOptions defaults;
    defaults.model = model_path;
    defaults.engine = "llamacpp";
    src.given = estimate_flags_given(flags);
    if (!has_gpu) {
      defaults.gpu = "cpu";
      src.gpu_origin = engines::GpuOrigin::detected;
      src.gpu_note = "libllama has no GPU device";
    } else if (!gpu_name.empty() && gpu::find_gpu(gpu_name)) {
      defaults.gpu = gpu_name;
      src.gpu_origin = engines::GpuOrigin::detected;
      src.gpu_note = "from nvml";
    } else {
      src.gpu_origin = engines::GpuOrigin::assumed;
      src.gpu_note = gpu_name.empty()
                         ? "NVML names no GPU"
                         : fmt::format("'{}' is not in kvprof's GPU catalog", gpu_name);
    }
    if (src.given.contains("gpu") || src.given.contains("gpu-mem")) {
      src.gpu_origin = engines::GpuOrigin::given;
      src.gpu_note = "--estimate-with";
    }
    auto input = parse_estimate_flags(flags, defaults);
    if (input && input->settings.engine != engines::Engine::llamacpp) {
      return fail(ErrorKind::usage,
                  "--estimate-with: bench runs llama.cpp; its plan needs --engine llamacpp");
    }
    // bench keeps libllama's default outputs (every token of the ubatch), not llama-server's.
    if (input) input->settings.llamacpp_outputs_per_slot = false;
    return input;
  };
  return w;
}

struct BenchState {
  bench::BenchConfig config;
  BenchEngineFlags flags;
  std::vector<uint32_t> mixed;
  bool json_out = false;
  bool no_report = false;
  bool quiet = false;
  bool no_color = false;
  std::optional<std::string> estimate_with;
  bool check_oom = false;
};

// --check-oom: whether each condition's context fits this machine, from the plan alone (the GGUF's
// header is read; the model is not loaded). Exit 4 when one does not.
void check_oom(const BenchState& st, bool has_gpu, std::optional<uint64_t> gpu_total_bytes) {
  const auto& config = st.config;
  const auto spec = bench::bench_model_spec(config);
  if (!spec) {
    throw Fatal({ErrorKind::input, fmt::format("{}: kvprof cannot read this GGUF's header to plan "
                                               "it",
                                               config.engine.model_path)});
  }
  const auto ram = sys::read_mem_info();
  const uint64_t host_bytes = ram.available_bytes.value_or(ram.total_bytes.value_or(0));
  nlohmann::json rows = nlohmann::json::array();
  report::text::Table t({"condition", "n_ctx", "-np", "host (GiB)", "GPU (GiB)", "fits"});
  std::string first_unfit;
  for (const auto& c : bench::make_conditions(config)) {
    const auto s = bench::settings_for(config, c);
    const auto plan = bench::bench_plan_json(config, &*spec, has_gpu, s.n_ctx, s.n_seq_max);
    if (plan.is_null()) {
      throw Fatal({ErrorKind::input, fmt::format("kvprof cannot plan {} with these settings",
                                                 config.engine.model_path)});
    }
    const uint64_t host = plan.value("host_total_bytes", uint64_t{0});
    const uint64_t gpu = plan.value("gpu_total_bytes", uint64_t{0});
    const bool fits =
        (host_bytes == 0 || host <= host_bytes) && (!gpu_total_bytes || gpu <= *gpu_total_bytes);
    if (!fits && first_unfit.empty()) {
      first_unfit = fmt::format(
          "{} needs {:.2f} GiB of host memory (this machine has {:.2f} GiB "
          "available){}",
          c.label, bytes_to_gib(host), bytes_to_gib(host_bytes),
          gpu_total_bytes ? fmt::format(" and {:.2f} GiB of GPU memory "
                                        "({:.2f} GiB)",
                                        bytes_to_gib(gpu), bytes_to_gib(*gpu_total_bytes))
                          : "");
    }
    rows.push_back({{"condition", c.label},
                    {"n_ctx", s.n_ctx},
                    {"n_seq_max", s.n_seq_max},
                    {"plan", plan},
                    {"fits", fits}});
    t.add_row({c.label, std::to_string(s.n_ctx), std::to_string(s.n_seq_max),
               fmt::format("{:.2f}", bytes_to_gib(host)),
               has_gpu ? fmt::format("{:.2f}", bytes_to_gib(gpu)) : "-", fits ? "yes" : "NO"});
  }
  const nlohmann::json doc = {{"schema_version", 1},
                              {"model", config.engine.model_path},
                              {"host_available_bytes", host_bytes},
                              {"gpu_total_bytes", gpu_total_bytes ? nlohmann::json(*gpu_total_bytes)
                                                                  : nlohmann::json(nullptr)},
                              {"conditions", rows},
                              {"fits", first_unfit.empty()}};
  if (st.json_out) {
    std::fputs((json_text(doc, 2) + "\n").c_str(), stdout);
  } else {
    std::fputs(fmt::format("plan for this machine ({:.2f} GiB of host memory available; the model "
                           "is not loaded):\n",
                           bytes_to_gib(host_bytes))
                   .c_str(),
               stdout);
    std::fputs(t.render().c_str(), stdout);
  }
  std::fflush(stdout);
  if (!first_unfit.empty()) {
    throw Fatal({ErrorKind::check_failed, "does not fit: " + first_unfit});
  }
}

void run_bench_command(BenchState& st) {
  auto& config = st.config;
  apply_bench_engine_flags(st.flags, config);
  if (!st.mixed.empty()) {
    if (st.mixed.size() != 2) throw Fatal({ErrorKind::usage, "--mixed takes SHORT,LONG"});
    config.mixed = {st.mixed[0], st.mixed[1]};
  }
  value_or_fatal(bench::resolve_defaults(config));
  // The engine and its memory: llama.cpp in-process, this machine's GPUs (--gpu-source).
  run::TargetSpec spec;
  spec.kind = run::TargetKind::in_process;
  spec.gpu_source = value_or_fatal(gpu::parse_gpu_source(st.flags.gpu_source));
  const auto target = value_or_fatal(run::open_target(spec));
  gpu::MemorySource* gpu_source = target->memory;
  const std::string gpu_name = target->memory_name;
  std::optional<uint64_t> gpu_total_bytes;
  if (gpu_source) {
    if (auto d = gpu_source->device_info(0); d && d->name) config.gpu_name = *d->name;
    if (auto m = gpu_source->sample_device(0); m) gpu_total_bytes = m->total_bytes;
  }
  // The plan alone needs no libllama.
  if (st.check_oom) return check_oom(st, gpu_source != nullptr, gpu_total_bytes);
  // The library must be there before a run folder is made for nothing.
  value_or_fatal(llama::find_llama_library(config.library));
  if (st.estimate_with) {
    config.estimate_with =
        estimate_with(*st.estimate_with, config.engine.model_path, config.gpu_name);
    // Flags that do not parse stop here, before anything runs.
    engines::AssumptionSources sources;
    const auto input = config.estimate_with->make_input(false, sources);
    if (!input) throw Fatal(input.error());
    value_or_fatal(engines::plan(*input));
  }
  std::unique_ptr<report::text::ProgressLine> progress;
  if (!st.quiet) progress = report::text::stderr_progress(st.no_color);
  const auto started = std::chrono::steady_clock::now();
  const auto on_event = [&](const bench::BenchReport& r, const nlohmann::json& e) {
    if (!progress) return;
    show_bench_event(
        *progress, r, e,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  };
  auto report = value_or_fatal(bench::run_bench(config, gpu_source, gpu_name, on_event));
  progress.reset();  // the status line ends before the table
  const nlohmann::json summary = bench::summary_json(config, report);
  if (auto run = results::read_run_summary(summary, {}, report.run_dir))
    results::record_or_warn(config.output_dir, results::history_entry(*run));
  // A model the engine refused measured nothing: its record (summary.json, the history entry)
  // is kept, with no table and no report.
  const bool refused = report.status == "refused";
  if (st.json_out) {
    std::fputs((json_text(summary, 2) + "\n").c_str(), stdout);
  } else if (!refused) {
    std::fputs(bench::summary_text(config, report).c_str(), stdout);
  }
  for (const auto& w : report.warnings)
    std::fprintf(stderr, "kvprof: warning: %s\n", w.c_str());
  if (!st.no_report && !refused) report_run_folder(report.run_dir, st.json_out);
  const int rc = bench::bench_exit_code(report);
  if (refused) {
    throw Fatal({ErrorKind::input, fmt::format("bench refused: {} (its record: {}/summary.json)",
                                               report.error, report.run_dir)});
  }
  if (rc != 0) {
    const ErrorKind kind = rc == 130 ? ErrorKind::interrupted
                           : rc == 2 ? ErrorKind::input
                                     : ErrorKind::driver;
    throw Fatal({kind, fmt::format("bench {}: {} (results kept in {})", report.status, report.error,
                                   report.run_dir)});
  }
}

}  // namespace

void register_bench_command(CLI::App& app) {
  auto st = std::make_shared<BenchState>();
  auto* cmd = app.add_subcommand(
      "bench",
      "Run llama.cpp in-process on a GGUF (libllama, loaded at run time) through a grid of "
      "concurrency x prompt length: host memory (RSS/PSS) at every step and GPU memory "
      "(NVML) where there is a GPU, next to the buffers llama.cpp reports; TTFT, ITL, tokens/s. "
      "Results go to results/<run_id>/ like `kvprof profile`'s.");
  auto& c = st->config;
  cmd->add_option("-m,--model", c.engine.model_path, "GGUF file (make one with `kvprof make-gguf`)")
      ->required()
      ->envname("KVPROF_MODEL");
  cmd->add_option("--concurrency", c.concurrencies, "Sequences run together (e.g. 1,2,4,8)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--prompt-toks,--seqlens", c.prompt_tokens,
                  "Prompt tokens per sequence; several values sweep the length")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--gen-toks", c.gen_tokens, "Tokens generated per sequence")
      ->capture_default_str();
  cmd->add_option("--mixed", st->mixed,
                  "SHORT,LONG: half the sequences of each condition short, half long")
      ->delimiter(',');
  add_bench_engine_options(cmd, c, st->flags);
  cmd->add_option("--estimate-with", st->estimate_with,
                  "Compare with kvprof's plan for these llama.cpp flags instead of the run's own "
                  "settings, e.g. \"-c 8192 -np 4 -ctk q8_0\" (the model defaults to the bench's "
                  "GGUF)");
  cmd->add_option("--output-dir", c.output_dir, "Where results/<run_id>/ goes")
      ->envname("KVPROF_OUTPUT_DIR")
      ->capture_default_str();
  cmd->add_option("--tag", c.run_tag, "Appended to the run id")->envname("KVPROF_RUN_TAG");
  cmd->add_flag("--check-oom", st->check_oom,
                "Only answer whether each condition fits this machine, from kvprof's plan: the "
                "GGUF's header is read, the model is not loaded (exit 4 when one does not fit)");
  cmd->add_flag("--json", st->json_out, "Print summary.json instead of the table");
  cmd->add_flag("--no-report", st->no_report,
                "Do not write report.html and the figures into the run folder");
  cmd->add_flag("-q,--quiet", st->quiet, "No progress on stderr");
  cmd->add_flag("--no-color", st->no_color, "No colour in the progress (also: NO_COLOR=1)");
  cmd->callback([st] { run_bench_command(*st); });
}

}  // namespace kvprof::cli
