// The report page's sections for experiments, each built from the file its command writes, so a
// report can be rebuilt from the folder alone: a sweep (sweep.json: per configuration, heatmaps of
// peak memory, KV usage and the estimate's KV need over input length x concurrency, and measured
// vs estimated memory across configurations), a find-max search (find_max.json: the steps, the
// answer and what each tried concurrency used) and the deltas of a comparison (`kvprof compare
// --json`: memory differences against the first run, the settings that differ, CUDA graphs).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/util/error.hpp"

namespace kvprof::report::html {

// The "sweep" section of `sweep` (sweep.json of the folder `dir`).
nlohmann::json sweep_section(const nlohmann::json& sweep, const std::filesystem::path& dir);

// The "find_max" section of `find_max` (find_max.json of the folder `dir`).
nlohmann::json find_max_section(const nlohmann::json& find_max, const std::filesystem::path& dir);

// The deltas a compare section shows, from a comparison's JSON (experiment::comparison_json).
nlohmann::json compare_deltas(const nlohmann::json& comparison);

// What kind of experiment folder `dir` is: "sweep" (sweep.json), "find-max" (find_max.json), or
// nullopt for anything else (a run folder).
std::optional<std::string> experiment_kind(const std::filesystem::path& dir);

// The run folders an experiment folder's runs live in (sweep configurations that ran, find-max
// steps), in order; `dir` is the experiment's folder, `doc` its JSON.
std::vector<std::filesystem::path> experiment_run_dirs(const std::string& kind,
                                                       const nlohmann::json& doc,
                                                       const std::filesystem::path& dir);

// Reads the JSON file of an experiment folder (sweep.json or find_max.json); an input error
// naming the file when it cannot be read or parsed.
Expected<nlohmann::json> read_experiment_file(const std::filesystem::path& dir,
                                              const std::string& kind);

}  // namespace kvprof::report::html
