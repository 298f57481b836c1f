// The SQLite history (see history_db.hpp). Only this file sees <sqlite3.h>.
#include "kvprof/results/history_db.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "kvprof/util/json_text.hpp"

namespace kvprof::results {

namespace fs = std::filesystem;

namespace {

constexpr int k_busy_timeout_ms = 15000;

const char* const k_schema_v1 =
    "CREATE TABLE IF NOT EXISTS entries ("
    " kind TEXT NOT NULL, id TEXT NOT NULL, status TEXT NOT NULL,"
    " model TEXT NOT NULL DEFAULT '', engine TEXT NOT NULL DEFAULT '',"
    " gpu TEXT NOT NULL DEFAULT '', started_unix_s REAL NOT NULL DEFAULT 0,"
    " ended_unix_s REAL NOT NULL DEFAULT 0, path TEXT NOT NULL DEFAULT '',"
    " grp TEXT NOT NULL DEFAULT '', peak_bytes INTEGER, n_requests INTEGER NOT NULL DEFAULT 0,"
    " n_ok INTEGER NOT NULL DEFAULT 0, n_errors INTEGER NOT NULL DEFAULT 0,"
    " extra TEXT NOT NULL DEFAULT '{}', recorded_unix_s REAL NOT NULL DEFAULT 0,"
    " PRIMARY KEY (kind, id));"
    "CREATE INDEX IF NOT EXISTS entries_started ON entries (started_unix_s);";

const char* const k_columns =
    "kind, id, status, model, engine, gpu, started_unix_s, ended_unix_s, path, grp, peak_bytes, "
    "n_requests, n_ok, n_errors, extra";

// A prepared statement, finalized when it goes out of scope.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) {
    m_rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &m_stmt, nullptr);
  }
  ~Statement() { sqlite3_finalize(m_stmt); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  [[nodiscard]] bool ok() const { return m_rc == SQLITE_OK; }
  sqlite3_stmt* get() const { return m_stmt; }
  void bind(int i, const std::string& s) {
    sqlite3_bind_text(m_stmt, i, s.c_str(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void bind(int i, double d) { sqlite3_bind_double(m_stmt, i, d); }
  void bind(int i, int64_t v) { sqlite3_bind_int64(m_stmt, i, v); }
  void bind_null(int i) { sqlite3_bind_null(m_stmt, i); }

 private:
  sqlite3_stmt* m_stmt = nullptr;
  int m_rc = SQLITE_ERROR;
};

std::string text_at(sqlite3_stmt* s, int col) {
  const auto* p = sqlite3_column_text(s, col);
  return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
}

HistoryEntry entry_from_row(sqlite3_stmt* s) {
  HistoryEntry e;
  e.kind = text_at(s, 0);
  e.id = text_at(s, 1);
  e.status = text_at(s, 2);
  e.model = text_at(s, 3);
  e.engine = text_at(s, 4);
  e.gpu = text_at(s, 5);
  e.started_unix_s = sqlite3_column_double(s, 6);
  e.ended_unix_s = sqlite3_column_double(s, 7);
  e.path = text_at(s, 8);
  e.group = text_at(s, 9);
  if (sqlite3_column_type(s, 10) != SQLITE_NULL)
    e.peak_bytes = static_cast<uint64_t>(sqlite3_column_int64(s, 10));
  e.n_requests = static_cast<uint64_t>(sqlite3_column_int64(s, 11));
  e.n_ok = static_cast<uint64_t>(sqlite3_column_int64(s, 12));
  e.n_errors = static_cast<uint64_t>(sqlite3_column_int64(s, 13));
  e.extra = nlohmann::json::parse(text_at(s, 14), nullptr, false);
  if (e.extra.is_discarded() || !e.extra.is_object()) e.extra = nlohmann::json::object();
  return e;
}

Error db_error(sqlite3* db, const fs::path& path, const std::string& what) {
  const int code = db != nullptr ? sqlite3_errcode(db) : SQLITE_NOMEM;
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) {
    return {ErrorKind::io,
            fmt::format("{} {}: {}", k_unreadable_history, path.string(), sqlite3_errmsg(db))};
  }
  return {ErrorKind::io, fmt::format("history {}: {}: {}", path.string(), what,
                                     db ? sqlite3_errmsg(db) : "out of memory")};
}

// Whether SQLite reads every page of the history (PRAGMA quick_check: milliseconds for a
// history of thousands of runs); the error says why not.
Expected<void> readable(sqlite3* db, const fs::path& path) {
  Statement st(db, "PRAGMA quick_check(1)");
  if (!st.ok() || sqlite3_step(st.get()) != SQLITE_ROW) {
    return std::unexpected(db_error(db, path, "cannot read"));
  }
  std::string answer = text_at(st.get(), 0).substr(0, 300);
  if (answer == "ok") return {};
  std::ranges::replace(answer, '\n', ' ');
  return fail(ErrorKind::io, fmt::format("{} {}: SQLite's check says: {}", k_unreadable_history,
                                         path.string(), answer));
}

bool exec(sqlite3* db, const char* sql) {
  return sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK;
}

Expected<int> user_version(sqlite3* db, const fs::path& path) {
  Statement st(db, "PRAGMA user_version");
  if (!st.ok() || sqlite3_step(st.get()) != SQLITE_ROW) {
    return std::unexpected(db_error(db, path, "not a kvprof history"));
  }
  return sqlite3_column_int(st.get(), 0);
}

// `path` relative to `base` when it lies inside it, else as given.
std::string relative_inside(const fs::path& base, const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  const fs::path b = fs::weakly_canonical(fs::absolute(base, ec), ec);
  const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) return path;
  const auto [bi, pi] = std::mismatch(b.begin(), b.end(), p.begin(), p.end());
  if (bi != b.end()) return p.string();
  return p.lexically_relative(b).string();
}

}  // namespace

Expected<std::unique_ptr<HistoryDb>> HistoryDb::open(const fs::path& results_dir, bool create) {
  auto db = open_file(results_dir, create);
  if (db || !db.error().message.starts_with(k_unreadable_history)) return db;
  // The run folders are the truth: the unreadable file is kept aside, a new history is started
  // and `kvprof runs` indexes the folders into it.
  const fs::path path = results_dir / k_history_db_file;
  const fs::path aside = fs::path(path.string() + ".unreadable");
  std::error_code ec;
  fs::rename(path, aside, ec);
  if (ec) return db;
  for (const char* suffix : {"-wal", "-shm"})
    fs::remove(path.string() + suffix, ec);
  std::string why = db.error().message.substr(k_unreadable_history.size());
  if (why.starts_with(" " + path.string() + ": ")) why.erase(0, path.string().size() + 3);
  std::fprintf(stderr,
               "kvprof: warning: the history %s could not be read (%s); it was moved to %s and "
               "is rebuilt from the run folders\n",
               path.c_str(), why.c_str(), aside.c_str());
  return open_file(results_dir, true);
}

Expected<std::unique_ptr<HistoryDb>> HistoryDb::open_file(const fs::path& results_dir,
                                                          bool create) {
  const fs::path path = results_dir / k_history_db_file;
  std::error_code ec;
  if (!create && !fs::exists(path, ec)) {
    return fail(ErrorKind::not_found, fmt::format("no history in {} yet", results_dir.string()));
  }
  if (create) fs::create_directories(results_dir, ec);
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    auto err = db_error(db, path, "cannot open");
    sqlite3_close(db);
    return std::unexpected(err);
  }
  std::unique_ptr<HistoryDb> out(new HistoryDb(db, results_dir));
  sqlite3_busy_timeout(db, k_busy_timeout_ms);
  // WAL lets readers go on while one process writes; when it cannot be set (a file system
  // without shared memory), the rollback journal with the busy timeout is still safe.
  exec(db, "PRAGMA journal_mode=WAL");
  auto version = user_version(db, path);
  if (!version) return std::unexpected(version.error());
  if (*version > 0) {
    if (auto r = readable(db, path); !r) return std::unexpected(r.error());
  }
  if (*version > k_history_schema_version) {
    return fail(ErrorKind::input,
                fmt::format("history {}: schema version {} was written by a newer kvprof (this "
                            "one reads {})",
                            path.string(), *version, k_history_schema_version));
  }
  if (*version < k_history_schema_version && create) {
    // Two processes may create it at once: the write lock decides, the second finds it done.
    if (!exec(db, "BEGIN IMMEDIATE")) return std::unexpected(db_error(db, path, "locked"));
    auto again = user_version(db, path);
    if (again && *again == 0) {
      if (!exec(db, k_schema_v1) ||
          !exec(db, fmt::format("PRAGMA user_version = {}", k_history_schema_version).c_str())) {
        auto err = db_error(db, path, "cannot create the schema");
        exec(db, "ROLLBACK");
        return std::unexpected(err);
      }
    }
    if (!exec(db, "COMMIT")) {
      auto err = db_error(db, path, "cannot create the schema");
      exec(db, "ROLLBACK");
      return std::unexpected(err);
    }
  }
  return out;
}

HistoryDb::~HistoryDb() {
  sqlite3_close(m_db);
}

Expected<void> HistoryDb::record(const HistoryEntry& e) {
  const fs::path path = m_results_dir / k_history_db_file;
  if (!exec(m_db, "BEGIN IMMEDIATE")) return std::unexpected(db_error(m_db, path, "locked"));
  Statement st(m_db, fmt::format("INSERT OR REPLACE INTO entries ({}, recorded_unix_s) VALUES "
                                 "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                                 k_columns));
  if (!st.ok()) {
    auto err = db_error(m_db, path, "cannot write");
    exec(m_db, "ROLLBACK");
    return std::unexpected(err);
  }
  st.bind(1, e.kind);
  st.bind(2, e.id);
  st.bind(3, e.status);
  st.bind(4, e.model);
  st.bind(5, e.engine);
  st.bind(6, e.gpu);
  st.bind(7, e.started_unix_s);
  st.bind(8, e.ended_unix_s);
  st.bind(9, relative_inside(m_results_dir, e.path));
  st.bind(10, e.group);
  if (e.peak_bytes) {
    st.bind(11, static_cast<int64_t>(*e.peak_bytes));
  } else {
    st.bind_null(11);
  }
  st.bind(12, static_cast<int64_t>(e.n_requests));
  st.bind(13, static_cast<int64_t>(e.n_ok));
  st.bind(14, static_cast<int64_t>(e.n_errors));
  st.bind(15, json_text(e.extra));
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  st.bind(16, std::chrono::duration<double>(now).count());
  if (sqlite3_step(st.get()) != SQLITE_DONE) {
    auto err = db_error(m_db, path, "cannot write");
    exec(m_db, "ROLLBACK");
    return std::unexpected(err);
  }
  if (!exec(m_db, "COMMIT")) {
    auto err = db_error(m_db, path, "cannot commit");
    exec(m_db, "ROLLBACK");
    return std::unexpected(err);
  }
  return {};
}

Expected<std::vector<HistoryEntry>> HistoryDb::list(const HistoryFilter& f) const {
  std::string sql = fmt::format("SELECT {} FROM entries WHERE started_unix_s >= ?", k_columns);
  if (!f.model.empty()) sql += " AND instr(lower(model), lower(?)) > 0";
  if (!f.engine.empty()) sql += " AND lower(engine) = lower(?)";
  if (!f.kind.empty()) sql += " AND kind = ?";
  if (!f.group.empty()) sql += " AND grp = ?";
  sql += " ORDER BY started_unix_s DESC, id DESC";
  if (f.limit > 0) sql += fmt::format(" LIMIT {}", f.limit);
  Statement st(m_db, sql);
  const fs::path path = m_results_dir / k_history_db_file;
  if (!st.ok()) return std::unexpected(db_error(m_db, path, "cannot read"));
  int i = 1;
  st.bind(i++, f.since_unix_s);
  if (!f.model.empty()) st.bind(i++, f.model);
  if (!f.engine.empty()) st.bind(i++, f.engine);
  if (!f.kind.empty()) st.bind(i++, f.kind);
  if (!f.group.empty()) st.bind(i++, f.group);
  std::vector<HistoryEntry> out;
  int rc = SQLITE_ROW;
  while ((rc = sqlite3_step(st.get())) == SQLITE_ROW)
    out.push_back(entry_from_row(st.get()));
  if (rc != SQLITE_DONE) return std::unexpected(db_error(m_db, path, "cannot read"));
  return out;
}

Expected<std::optional<HistoryEntry>> HistoryDb::find(const std::string& id) const {
  Statement st(m_db, fmt::format("SELECT {} FROM entries WHERE id = ? ORDER BY "
                                 "started_unix_s DESC LIMIT 1",
                                 k_columns));
  const fs::path path = m_results_dir / k_history_db_file;
  if (!st.ok()) return std::unexpected(db_error(m_db, path, "cannot read"));
  st.bind(1, id);
  const int rc = sqlite3_step(st.get());
  if (rc == SQLITE_ROW) return std::optional<HistoryEntry>(entry_from_row(st.get()));
  if (rc != SQLITE_DONE) return std::unexpected(db_error(m_db, path, "cannot read"));
  return std::optional<HistoryEntry>();
}

fs::path entry_folder(const fs::path& results_dir, const HistoryEntry& entry) {
  const fs::path p(entry.path);
  return p.is_absolute() ? p : results_dir / p;
}

bool record_or_warn(const fs::path& results_dir, const HistoryEntry& entry) {
  auto db = HistoryDb::open(results_dir, true);
  Expected<void> done = db ? (*db)->record(entry) : std::unexpected(db.error());
  if (!done) {
    std::fprintf(stderr, "kvprof: warning: the history was not updated (%s); the run is kept\n",
                 done.error().message.c_str());
    return false;
  }
  return true;
}

std::optional<fs::path> resolve_run(const fs::path& results_dir, const std::string& id_or_path) {
  std::error_code ec;
  if (id_or_path.empty()) return std::nullopt;
  if (fs::is_directory(id_or_path, ec)) return fs::path(id_or_path);
  if (id_or_path == k_latest_run) {
    auto db = HistoryDb::open(results_dir, false);
    auto entries = db ? (*db)->list({}) : Expected<std::vector<HistoryEntry>>{};
    if (!entries) return std::nullopt;
    for (const auto& e : *entries) {
      if (e.kind != "profile" && e.kind != "bench") continue;
      const fs::path folder = entry_folder(results_dir, e);
      if (fs::is_directory(folder, ec)) return folder;
    }
    return std::nullopt;
  }
  if (auto db = HistoryDb::open(results_dir, false)) {
    if (auto e = (*db)->find(id_or_path); e && *e) {
      const fs::path folder = entry_folder(results_dir, **e);
      if (fs::is_directory(folder, ec)) return folder;
    }
  }
  if (id_or_path.find('/') == std::string::npos && id_or_path != "." && id_or_path != ".." &&
      fs::is_directory(results_dir / id_or_path, ec)) {
    return results_dir / id_or_path;
  }
  return std::nullopt;
}

}  // namespace kvprof::results
