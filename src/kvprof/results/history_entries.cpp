// History entries from run summaries (see history_entries.hpp).
#include "kvprof/results/history_entries.hpp"

#include <set>

#include "kvprof/results/run_folder.hpp"

namespace kvprof::results {

HistoryEntry history_entry(const RunSummary& run, const std::string& group) {
  HistoryEntry e;
  e.kind = run.kind;
  e.id = run.id.empty() ? run.dir.filename().string() : run.id;
  e.model = run.model;
  e.engine = run.engine;
  e.gpu = run.gpu_name();
  e.started_unix_s = run.started_unix_s;
  e.ended_unix_s = run.started_unix_s + run.duration_s;
  e.path = run.dir.string();
  e.group = group;
  e.status = run.status;
  e.peak_bytes = run.peak_bytes;
  e.n_requests = run.n_requests;
  e.n_ok = run.n_ok;
  e.n_errors = run.n_errors;
  if (run.kind == "bench") {
    e.extra = {{"peak_bytes_is", "host RSS of the engine process"}, {"error", run.error}};
  } else {
    e.extra = {{"simulated", run.simulated},
               {"endpoint", run.endpoint},
               {"memory_source", run.memory_source},
               {"tokens_per_second", run.tokens_per_s}};
    if (run.memory != "GPU") e.extra["peak_bytes_is"] = "host RSS of the server";
  }
  return e;
}

Expected<size_t> index_unrecorded_runs(const std::filesystem::path& results_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(results_dir, ec)) return size_t{0};
  std::vector<fs::path> folders;
  for (const auto& d : fs::directory_iterator(results_dir, ec)) {
    if (d.is_directory(ec) && fs::is_regular_file(d.path() / "summary.json", ec)) {
      folders.push_back(d.path());
    }
  }
  if (folders.empty()) return size_t{0};
  auto db = HistoryDb::open(results_dir, true);
  if (!db) return std::unexpected(db.error());
  auto entries = (*db)->list({});
  if (!entries) return std::unexpected(entries.error());
  std::set<fs::path> recorded;
  for (const auto& e : *entries)
    recorded.insert(fs::weakly_canonical(entry_folder(results_dir, e), ec));
  size_t added = 0;
  for (const auto& folder : folders) {
    if (recorded.contains(fs::weakly_canonical(folder, ec))) continue;
    auto run = open_run_folder(folder);
    if (!run) continue;  // unreadable or not a run: nothing to index
    auto done = (*db)->record(history_entry(run->summary));
    if (!done) return std::unexpected(done.error());
    ++added;
  }
  return added;
}

}  // namespace kvprof::results
