// `kvprof report RUN [RUN ...]`: report.html (interactive, self-contained) and the figures as
// PNG/SVG for one or more run folders of `profile` or `bench` (several: side by side, with their
// differences), or for the folder of a sweep or a find-max search.
#include <fmt/format.h>

#include <cstdio>
#include <ctime>

#include "kvprof/cli/commands.hpp"
#include "kvprof/cli/run_report.hpp"
#include "kvprof/experiment/compare.hpp"
#include "kvprof/report/html/experiment_sections.hpp"
#include "kvprof/report/html/page.hpp"
#include "kvprof/results/history_db.hpp"

namespace kvprof::cli {
namespace {

namespace fs = std::filesystem;

struct ReportCliState {
  std::vector<std::string> runs;
  std::string results_dir = "results";
  std::string output_dir;
  std::string formats = "html,png";
};

// One run: its own folder. Several: report_<time> beside the first.
fs::path default_output(const std::vector<fs::path>& runs) {
  if (runs.size() == 1) return runs.front();
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d_%H%M%S", &tm);
  return fs::path(runs.front()).lexically_normal().parent_path() / (std::string("report_") + stamp);
}

// The runs' differences for the page, from the summaries they were read with.
nlohmann::json comparison_of(const std::vector<report::html::RunData>& runs) {
  std::vector<results::RunSummary> summaries;
  for (const auto& run : runs)
    summaries.push_back(run.summary);
  return experiment::comparison_json(experiment::compare_runs(std::move(summaries), {}));
}

void print_written(const std::vector<fs::path>& written) {
  for (const auto& path : written) {
    std::printf("%s: %s\n", path.extension() == ".html" ? "report" : "figure", path.c_str());
  }
}

void run_report_command(const ReportCliState& st) {
  auto options = value_or_fatal(report::html::parse_formats(st.formats));
  std::vector<report::html::RunData> runs;
  std::vector<fs::path> dirs;
  for (const auto& name : st.runs) {
    const auto dir = results::resolve_run(st.results_dir, name);
    if (!dir) {
      throw Fatal({ErrorKind::not_found,
                   fmt::format("no run '{}': not a folder, nor a run id in {} (see `kvprof runs`)",
                               name, st.results_dir)});
    }
    if (const auto kind = report::html::experiment_kind(*dir)) {
      if (st.runs.size() > 1) {
        throw Fatal({ErrorKind::usage,
                     fmt::format("'{}' is a {} folder: report it alone", dir->string(), *kind)});
      }
      const fs::path out = st.output_dir.empty() ? *dir : fs::path(st.output_dir);
      print_written(value_or_fatal(report::html::write_experiment_report(*dir, out, options)));
      return;
    }
    auto run = report::html::load_run_data(*dir);
    if (!run) throw Fatal(run.error().with_context(dir->string()));
    runs.push_back(std::move(*run));
    dirs.push_back(*dir);
  }
  const fs::path out = st.output_dir.empty() ? default_output(dirs) : fs::path(st.output_dir);
  report::html::ReportExtras extras;
  if (runs.size() > 1 && options.html) extras.comparison = comparison_of(runs);
  print_written(value_or_fatal(report::html::write_report(runs, out, options, extras)));
}

}  // namespace

void report_experiment_folder(const std::filesystem::path& dir, bool json_on_stdout) {
  report::html::ReportOptions options;
  auto written = report::html::write_experiment_report(dir, dir, options);
  if (!written) {
    std::fprintf(stderr, "kvprof: warning: report not written: %s\n",
                 written.error().message.c_str());
    return;
  }
  std::fflush(stdout);
  for (const auto& path : *written)
    std::fprintf(json_on_stdout ? stderr : stdout, "report: %s\n", path.c_str());
  std::fflush(stdout);
}

void report_run_folder(const std::filesystem::path& run_dir, bool json_on_stdout) {
  auto page = report::html::write_run_report(run_dir);
  if (!page) {
    std::fprintf(stderr, "kvprof: warning: report not written: %s\n", page.error().message.c_str());
    return;
  }
  std::fprintf(json_on_stdout ? stderr : stdout, "report: %s\n", page->c_str());
  std::fflush(stdout);
}

void register_report_command(CLI::App& app) {
  auto st = std::make_shared<ReportCliState>();
  auto* cmd = app.add_subcommand(
      "report",
      "Write the report of run folders (results/<run_id>/ of profile or bench): report.html, one "
      "self-contained page with interactive charts (memory timeline with requests, KV usage, "
      "capture points and phases; peak memory and throughput vs concurrency beside the "
      "estimate; latency percentiles; the breakdown measured vs estimated), and the figures "
      "fig1_mem_vs_concurrency and fig2_tps_vs_concurrency as PNG/SVG. Several runs: side by "
      "side, with their differences against the first. A sweep folder (results/sweeps/<name>/): "
      "heatmaps of peak memory and KV usage over input length x concurrency per configuration. "
      "A find-max folder: its steps and answer");
  cmd->add_option("runs", st->runs,
                  "Run folders, run ids of the history under --results-dir, or `latest`; or one "
                  "sweep or find-max folder")
      ->required();
  cmd->add_option("--results-dir", st->results_dir, "Where run ids are looked up")
      ->envname("KVPROF_OUTPUT_DIR")
      ->capture_default_str();
  cmd->add_option("-o,--output-dir", st->output_dir,
                  "Where the files go (default: the run folder; several runs: report_<time> "
                  "beside the first)");
  cmd->add_option("--format", st->formats, "Any of html, png, svg, comma-separated")
      ->capture_default_str();
  cmd->callback([st] { run_report_command(*st); });
}

}  // namespace kvprof::cli
