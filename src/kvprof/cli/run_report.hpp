// The report that `profile`, `bench`, `sweep` and `find-max` write into their folder at the end
// (--no-report skips it).
#pragma once

#include <filesystem>

namespace kvprof::cli {

// Writes report.html and the PNG figures into `run_dir` and prints where the page is (on stderr
// when `json_on_stdout`); a failure is a warning: the measurement is already saved.
void report_run_folder(const std::filesystem::path& run_dir, bool json_on_stdout);

// Writes report.html into a sweep's or a find-max search's folder and prints where it is; a
// failure is a warning.
void report_experiment_folder(const std::filesystem::path& dir, bool json_on_stdout);

}  // namespace kvprof::cli
