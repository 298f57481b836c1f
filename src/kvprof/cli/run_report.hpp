// The report that `profile` and `bench` write into their run folder at the end (--no-report
// skips it).
#pragma once

#include <filesystem>

namespace kvprof::cli {

// Writes report.html and the PNG figures into `run_dir` and prints where the page is (on stderr
// when `json_on_stdout`); a failure is a warning: the measurement is already saved.
void report_run_folder(const std::filesystem::path& run_dir, bool json_on_stdout);

}  // namespace kvprof::cli
