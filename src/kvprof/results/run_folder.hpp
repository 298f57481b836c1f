// A run folder (results/<run_id>/ of `profile` or `bench`) opened once: found by folder, run id
// or `latest`, its summary.json and manifest.json read with their sizes bounded, and its typed
// summary. Every reader of run folders (compare, validate, report, the HTML report) opens runs
// here.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "kvprof/results/run_summary.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::results {

struct RunFolder {
  std::filesystem::path dir;
  RunSummary summary;
  nlohmann::json summary_json;   // the document as written, for fields the summary does not type
  nlohmann::json manifest_json;  // null when the folder has none
};

// `run` is a run folder, `latest`, or a run id looked up in the history of `results_dir`
// (results::resolve_run). not_found when none names a folder with a summary.json; an input error
// when a document is not JSON or the summary is not a kvprof run summary.
Expected<RunFolder> open_run(const std::string& run, const std::filesystem::path& results_dir);

// Opens the run folder `dir` itself: not_found when it holds no summary.json.
Expected<RunFolder> open_run_folder(const std::filesystem::path& dir);

// open_run's typed summary alone.
Expected<RunSummary> load_run(const std::string& run, const std::filesystem::path& results_dir);

// Reads a JSON object file of at most 64 MiB (a run's summary.json, sweep.json, find_max.json);
// not_found when it is missing, an input error naming the file when it is not a JSON object.
Expected<nlohmann::json> read_json_file(const std::filesystem::path& path);

}  // namespace kvprof::results
