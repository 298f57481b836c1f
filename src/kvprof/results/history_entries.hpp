// History entries made from what a command wrote: a profile run's summary.json.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "kvprof/results/history_db.hpp"

namespace kvprof::results {

// The entry of a profile run from its summary.json (`summary`) in `run_dir`, part of sweep
// `group` (empty: none). Missing fields stay empty; never throws.
HistoryEntry profile_entry(const nlohmann::json& summary, const std::filesystem::path& run_dir,
                           const std::string& group = "");

// The entry of a bench run from its summary.json (`summary`) in `run_dir`; never throws.
HistoryEntry bench_entry_from_summary(const nlohmann::json& summary,
                                      const std::filesystem::path& run_dir);

// Indexes the run folders directly in `results_dir` whose summary.json the history lacks (a run
// whose record failed: the lock was held too long, the disk was full); returns how many it added,
// or an io error when the history cannot be opened or written.
Expected<size_t> index_unrecorded_runs(const std::filesystem::path& results_dir);

// "completed", "partial", "interrupted" or "failed" from the request totals of a run.
std::string run_status(bool interrupted, uint64_t n_requests, uint64_t n_ok, uint64_t n_errors);

}  // namespace kvprof::results
