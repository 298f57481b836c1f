// History entries from run summaries (see history_entries.hpp).
#include "kvprof/results/history_entries.hpp"

#include <set>

#include <fmt/format.h>

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
  // A run of a sweep says so in its manifest (indexed again from its folder, it keeps its sweep).
  e.group = group;
  if (e.group.empty()) {
    if (const auto it = run.settings.find("sweep"); it != run.settings.end()) e.group = it->second;
  }
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

Expected<HistoryEntry> sweep_entry(const nlohmann::json& sweep, const std::filesystem::path& dir) {
  const auto text = [&](const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>().substr(0, 1000)
                                            : std::string();
  };
  if (!sweep.is_object() || text(sweep, "name").empty()) {
    return fail(ErrorKind::input,
                fmt::format("{}: sweep.json is not a kvprof sweep", dir.string()));
  }
  HistoryEntry e;
  e.kind = "sweep";
  e.id = text(sweep, "name");
  e.group = e.id;
  e.path = dir.string();
  const std::string status = text(sweep, "status");
  // "running": a sweep stopped without saying so (its process was killed).
  e.status = status == "completed"                 ? "completed"
             : status == "completed_with_failures" ? "partial"
                                                   : "interrupted";
  const auto number = [&](const char* key) {
    const auto it = sweep.find(key);
    return it != sweep.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  e.started_unix_s = number("first_started_unix_s");
  e.ended_unix_s = number("updated_unix_s");
  size_t n = 0, finished = 0, failed = 0, skipped = 0;
  if (const auto cs = sweep.find("configurations"); cs != sweep.end() && cs->is_array()) {
    for (const auto& c : *cs) {
      if (!c.is_object() || n >= 100000) continue;
      ++n;
      const std::string model = text(c, "model_id");
      const auto settings = c.find("settings");
      const std::string engine =
          settings != c.end() && settings->is_object() ? text(*settings, "engine") : std::string();
      if (!model.empty() && e.model.find(model) == std::string::npos && e.model.size() < 2000)
        e.model += (e.model.empty() ? "" : ", ") + model;
      if (!engine.empty() && e.engine.find(engine) == std::string::npos)
        e.engine += (e.engine.empty() ? "" : ",") + engine;
      const std::string st = text(c, "status");
      finished += st == "done" || st == "partial" ? 1 : 0;
      failed += st == "failed" ? 1 : 0;
      skipped += st == "skipped" ? 1 : 0;
    }
  }
  e.extra = {{"configurations", n},
             {"finished", finished},
             {"failed", failed},
             {"skipped", skipped},
             {"config_file", text(sweep, "config_file")}};
  return e;
}

Expected<size_t> index_unrecorded_runs(const std::filesystem::path& results_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(results_dir, ec)) return size_t{0};
  // Run folders directly in the results folder, and the sweeps under sweeps/.
  std::vector<fs::path> folders, sweeps;
  for (const auto& d : fs::directory_iterator(results_dir, ec)) {
    if (d.is_directory(ec) && fs::is_regular_file(d.path() / "summary.json", ec))
      folders.push_back(d.path());
  }
  for (const auto& d : fs::directory_iterator(results_dir / "sweeps", ec)) {
    if (d.is_directory(ec) && fs::is_regular_file(d.path() / "sweep.json", ec))
      sweeps.push_back(d.path());
  }
  if (folders.empty() && sweeps.empty()) return size_t{0};
  auto db = HistoryDb::open(results_dir, true);
  if (!db) return std::unexpected(db.error());
  auto entries = (*db)->list({});
  if (!entries) return std::unexpected(entries.error());
  std::set<fs::path> recorded;
  for (const auto& e : *entries)
    recorded.insert(fs::weakly_canonical(entry_folder(results_dir, e), ec));
  size_t added = 0;
  const auto add = [&](const Expected<HistoryEntry>& e) -> Expected<void> {
    if (!e) return {};  // not a run or a sweep: nothing to index
    if (auto done = (*db)->record(*e); !done) return done;
    ++added;
    return {};
  };
  for (const auto& folder : folders) {
    if (recorded.contains(fs::weakly_canonical(folder, ec))) continue;
    auto run = open_run_folder(folder);
    if (!run) continue;  // unreadable or not a run
    if (auto r = add(history_entry(run->summary)); !r) return std::unexpected(r.error());
  }
  for (const auto& dir : sweeps) {
    if (recorded.contains(fs::weakly_canonical(dir, ec))) continue;
    auto j = read_json_file(dir / "sweep.json");
    if (!j) continue;
    if (auto r = add(sweep_entry(*j, dir)); !r) return std::unexpected(r.error());
  }
  return added;
}

Expected<size_t> reindex_history(const std::filesystem::path& results_dir) {
  namespace fs = std::filesystem;
  const fs::path path = results_dir / k_history_db_file;
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    fs::remove(path.string() + suffix, ec);
    if (ec) {
      return fail(ErrorKind::io,
                  fmt::format("cannot remove {}{}: {}", path.string(), suffix, ec.message()));
    }
  }
  return index_unrecorded_runs(results_dir);
}

}  // namespace kvprof::results
