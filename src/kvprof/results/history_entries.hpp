// History entries made from runs' typed summaries, and the run folders the history lacks.
#pragma once

#include <filesystem>
#include <string>

#include "kvprof/results/history_db.hpp"
#include "kvprof/results/run_summary.hpp"

namespace kvprof::results {

// The history's entry of a run (profile or bench) from its typed summary, part of sweep `group`
// (empty: none).
HistoryEntry history_entry(const RunSummary& run, const std::string& group = "");

// Indexes the run folders directly in `results_dir` whose summary.json the history lacks (a run
// whose record failed: the lock was held too long, the disk was full); returns how many it added,
// or an io error when the history cannot be opened or written.
Expected<size_t> index_unrecorded_runs(const std::filesystem::path& results_dir);

}  // namespace kvprof::results
