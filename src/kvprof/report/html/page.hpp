// `kvprof report`: the report of one or more run folders — report.html (one self-contained page:
// the data as JSON, Chart.js and the page's script embedded, nothing fetched) and the figures as
// PNG/SVG drawn with cairo. The page is a list of sections, each drawn by one function of the
// page's script: one "run" section per run, and a "compare" section when there are several
// (sweeps and comparisons add their own section type the same way).
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/report/html/run_data.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::report::html {

struct ReportOptions {
  bool html = true;
  bool png = false;
  bool svg = false;
  size_t n_buckets = 2000;  // display buckets per trace (each keeps up to 3 points)
};

// What a report shows besides its runs.
struct ReportExtras {
  nlohmann::json lead;        // a sweep or find-max section, shown first (null: none)
  nlohmann::json comparison;  // the runs' comparison (experiment::comparison_json): the deltas
  bool side_by_side = true;   // several runs: their figures 1 and 2 side by side
};

// Parses "html,png,svg" (any subset); usage error for another word.
Expected<ReportOptions> parse_formats(const std::string& formats);

// The page's data: header, sections and their figures, traces downsampled to `n_buckets`.
nlohmann::json report_data(std::span<const RunData> runs, size_t n_buckets,
                           const ReportExtras& extras = {});

// The self-contained page for `data`.
std::string report_html(const nlohmann::json& data);

// Writes the report of `runs` into `out_dir` (created); returns the files written, or an io error.
Expected<std::vector<std::filesystem::path>> write_report(std::span<const RunData> runs,
                                                          const std::filesystem::path& out_dir,
                                                          const ReportOptions& options,
                                                          const ReportExtras& extras = {});

// Loads the run folder and writes its report (html and png) into it: what `profile` and `bench`
// call at the end; returns the path of report.html.
Expected<std::filesystem::path> write_run_report(const std::filesystem::path& run_dir);

// The report of an experiment folder (a sweep's or a find-max search's, see experiment_kind):
// its own section first, then a section per run it made, written into `out_dir`; returns the
// files written. Runs whose folder is gone are left out with a warning in the page.
Expected<std::vector<std::filesystem::path>> write_experiment_report(
    const std::filesystem::path& dir, const std::filesystem::path& out_dir,
    const ReportOptions& options);

}  // namespace kvprof::report::html
