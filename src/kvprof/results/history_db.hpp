// The history of a results folder: every profile run, bench, sweep and comparison indexed in one
// SQLite database, <results>/kvprof_history.sqlite. The schema carries its version in
// `PRAGMA user_version`; every write is one transaction; WAL and a busy timeout let several kvprof
// processes write at once. The run folders stay the truth: the index only points at them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/util/error.hpp"

struct sqlite3;

namespace kvprof::results {

inline constexpr int k_history_schema_version = 1;
inline constexpr const char* k_history_db_file = "kvprof_history.sqlite";
// How the message of an error starts when SQLite cannot read the history file (corrupted, or not
// a database): HistoryDb::open then moves it aside and starts a new one.
inline constexpr std::string_view k_unreadable_history = "unreadable history";

// One indexed thing: a run folder, or a sweep (its folder under sweeps/).
struct HistoryEntry {
  std::string id;      // run id, or the sweep's name
  std::string kind;    // "profile", "bench", "sweep", "compare", "validate", ...
  std::string status;  // "completed", "partial", "interrupted", "failed"
  std::string model;
  std::string engine;
  std::string gpu;
  double started_unix_s = 0;
  double ended_unix_s = 0;
  std::string path;                    // the folder: relative to the results folder when inside it
  std::string group;                   // the sweep a run belongs to; empty otherwise
  std::optional<uint64_t> peak_bytes;  // peak memory measured (GPU, else host)
  uint64_t n_requests = 0, n_ok = 0, n_errors = 0;
  nlohmann::json extra = nlohmann::json::object();  // facts of its kind
};

struct HistoryFilter {
  std::string model;   // substring, case-insensitive
  std::string engine;  // exact, case-insensitive
  std::string kind;
  std::string group;
  double since_unix_s = 0;  // started at or after
  size_t limit = 0;         // 0: all; newest first
};

class HistoryDb {
 public:
  // Opens (with `create`: creates) the database of `results_dir`. not_found when it does not
  // exist and `create` is false; io error when it cannot be opened; input error when a newer
  // kvprof wrote its schema. A file SQLite cannot read (corrupted) is moved aside to
  // kvprof_history.sqlite.unreadable with a warning, and a new, empty history opened instead
  // (index_unrecorded_runs fills it from the run folders).
  static Expected<std::unique_ptr<HistoryDb>> open(const std::filesystem::path& results_dir,
                                                   bool create);
  ~HistoryDb();
  HistoryDb(const HistoryDb&) = delete;
  HistoryDb& operator=(const HistoryDb&) = delete;

  // Inserts `entry`, replacing one of the same kind and id; io error when the write fails.
  Expected<void> record(const HistoryEntry& entry);

  // The entries matching `filter`, newest first; io error when the read fails.
  Expected<std::vector<HistoryEntry>> list(const HistoryFilter& filter) const;

  // The newest entry with this id (any kind); nullopt when none; io error when the read fails.
  Expected<std::optional<HistoryEntry>> find(const std::string& id) const;

  [[nodiscard]] const std::filesystem::path& results_dir() const { return m_results_dir; }

 private:
  static Expected<std::unique_ptr<HistoryDb>> open_file(const std::filesystem::path& results_dir,
                                                        bool create);
  HistoryDb(sqlite3* db, std::filesystem::path results_dir)
      : m_db(db), m_results_dir(std::move(results_dir)) {}
  sqlite3* m_db = nullptr;
  std::filesystem::path m_results_dir;
};

// The folder an entry points at (its path taken from the results folder when relative).
std::filesystem::path entry_folder(const std::filesystem::path& results_dir,
                                   const HistoryEntry& entry);

// Records `entry` in the history of `results_dir`, creating it; on failure prints one warning line
// on stderr and returns false (the run itself is never lost).
bool record_or_warn(const std::filesystem::path& results_dir, const HistoryEntry& entry);

// What `latest` names in resolve_run: the newest profile or bench run whose folder exists.
inline constexpr const char* k_latest_run = "latest";

// The run folder `id_or_path` names: an existing folder, else `latest`, else a run id of the
// history whose folder exists, else `results_dir`/id; nullopt when none exists.
std::optional<std::filesystem::path> resolve_run(const std::filesystem::path& results_dir,
                                                 const std::string& id_or_path);

}  // namespace kvprof::results
