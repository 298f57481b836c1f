// History entries made from runs' typed summaries, and the run folders the history lacks.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "kvprof/results/history_db.hpp"
#include "kvprof/results/run_summary.hpp"

namespace kvprof::results {

// The history's entry of a run (profile or bench) from its typed summary, part of sweep `group`
// (empty: none).
HistoryEntry history_entry(const RunSummary& run, const std::string& group = "");

// The history's entry of the sweep whose sweep.json is `sweep`, in folder `dir`; an input error
// when it is not a kvprof sweep.
Expected<HistoryEntry> sweep_entry(const nlohmann::json& sweep, const std::filesystem::path& dir);

// Indexes the run folders directly in `results_dir` and the sweeps under its sweeps/ that the
// history lacks (a record that failed: a busy lock, a full disk, a history rebuilt); returns how
// many it added, or an io error when the history cannot be opened or written.
Expected<size_t> index_unrecorded_runs(const std::filesystem::path& results_dir);

// Rebuilds the history of `results_dir` from its folders alone (the run folders are the truth);
// returns how many it indexed.
Expected<size_t> reindex_history(const std::filesystem::path& results_dir);

}  // namespace kvprof::results
