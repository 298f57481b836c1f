// The history database: schema version, records and filters, a newer schema refused, run ids
// resolved to folders, folders moved by hand reported, and concurrent writers (processes writing
// at once, and two real `kvprof profile` runs into one results folder) losing nothing.
#include "kvprof/results/history_db.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "kvprof/results/history_entries.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace kvprof::results {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class History : public test::TempDirTest {
 protected:
  History() : TempDirTest("kvprof_history") {}

  static HistoryEntry entry(const std::string& id, const std::string& model, double started,
                            const std::string& engine = "vllm") {
    HistoryEntry e;
    e.id = id;
    e.kind = "profile";
    e.status = "completed";
    e.model = model;
    e.engine = engine;
    e.started_unix_s = started;
    e.ended_unix_s = started + 10;
    e.n_requests = 4;
    e.n_ok = 4;
    e.peak_bytes = 123;
    return e;
  }

  int user_version() const {
    sqlite3* db = nullptr;
    sqlite3_open((m_dir / k_history_db_file).c_str(), &db);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr);
    sqlite3_step(st);
    const int v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
  }
};

TEST_F(History, RecordsListsFiltersAndReplaces) {
  EXPECT_EQ(HistoryDb::open(m_dir, false).error().kind, ErrorKind::not_found);
  auto db = HistoryDb::open(m_dir, true);
  ASSERT_TRUE(db) << db.error().message;
  EXPECT_EQ(user_version(), k_history_schema_version);
  fs::create_directories(m_dir / "run_a");
  HistoryEntry a = entry("run_a", "meta-llama/Llama-3.1-8B-Instruct", 1000);
  a.path = (m_dir / "run_a").string();  // stored relative to the results folder
  a.extra = {{"k", 1}};
  ASSERT_TRUE((*db)->record(a));
  ASSERT_TRUE((*db)->record(entry("run_b", "Qwen/Qwen2.5-7B-Instruct", 2000, "sglang")));
  ASSERT_TRUE((*db)->record(entry("run_c", "meta-llama/Llama-3.1-70B-Instruct", 3000)));

  auto all = (*db)->list({});
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].id, "run_c");  // newest first
  EXPECT_EQ((*all)[2].path, "run_a");
  EXPECT_EQ((*all)[2].extra.at("k"), 1);
  EXPECT_EQ(*(*all)[2].peak_bytes, 123u);

  HistoryFilter f;
  f.model = "LLAMA";
  EXPECT_EQ((*db)->list(f)->size(), 2u);
  f = {};
  f.engine = "SGLang";
  ASSERT_EQ((*db)->list(f)->size(), 1u);
  EXPECT_EQ((*db)->list(f)->front().id, "run_b");
  f = {};
  f.since_unix_s = 1500;
  EXPECT_EQ((*db)->list(f)->size(), 2u);
  f = {};
  f.limit = 1;
  EXPECT_EQ((*db)->list(f)->size(), 1u);

  // The same kind and id again replaces the entry (a sweep run again updates its own).
  HistoryEntry again = entry("run_b", "Qwen/Qwen2.5-7B-Instruct", 2000, "sglang");
  again.status = "interrupted";
  ASSERT_TRUE((*db)->record(again));
  EXPECT_EQ((*db)->list({})->size(), 3u);
  EXPECT_EQ((*(*db)->find("run_b"))->status, "interrupted");
  EXPECT_FALSE(*(*db)->find("nope"));
}

TEST_F(History, ANewerSchemaIsRefusedAndAForeignFileIsKeptAside) {
  ASSERT_TRUE(HistoryDb::open(m_dir, true));
  sqlite3* raw = nullptr;
  sqlite3_open((m_dir / k_history_db_file).c_str(), &raw);
  sqlite3_exec(raw, "PRAGMA user_version = 99", nullptr, nullptr, nullptr);
  sqlite3_close(raw);
  auto db = HistoryDb::open(m_dir, true);
  ASSERT_FALSE(db);
  EXPECT_EQ(db.error().kind, ErrorKind::input);
  EXPECT_NE(db.error().message.find("newer kvprof"), std::string::npos);

  const fs::path other = m_dir / "other";
  fs::create_directories(other);
  std::ofstream(other / k_history_db_file)
      << "this is not a database, just text that is long enough";
  // Not a database: kept aside, and a new history is started in its place.
  auto bad = HistoryDb::open(other, true);
  ASSERT_TRUE(bad) << bad.error().message;
  EXPECT_TRUE((*bad)->list({})->empty());
  std::ifstream aside(other / (std::string(k_history_db_file) + ".unreadable"));
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(aside), {}),
            "this is not a database, just text that is long enough");
  EXPECT_TRUE(record_or_warn(other, entry("x", "m", 1)));
}

TEST_F(History, ResolvesFoldersRunIdsAndNamesInTheResultsFolder) {
  const fs::path results = m_dir / "results";
  fs::create_directories(results / "20250101_000000");
  fs::create_directories(m_dir / "elsewhere" / "moved_run");
  HistoryEntry e = entry("moved_run", "m", 5);
  e.path = (m_dir / "elsewhere" / "moved_run").string();  // outside: kept absolute
  ASSERT_TRUE(record_or_warn(results, e));

  EXPECT_EQ(resolve_run(results, (m_dir / "elsewhere").string()), m_dir / "elsewhere");
  EXPECT_EQ(resolve_run(results, "moved_run"), m_dir / "elsewhere" / "moved_run");
  EXPECT_EQ(resolve_run(results, "20250101_000000"), results / "20250101_000000");
  EXPECT_FALSE(resolve_run(results, "20990101_000000"));
  EXPECT_FALSE(resolve_run(results, ""));
  HistoryEntry sweep = entry("a_sweep", "m", 9);  // newer, but not a run
  sweep.kind = "sweep";
  sweep.path = "20250101_000000";
  ASSERT_TRUE(record_or_warn(results, sweep));
  EXPECT_EQ(resolve_run(results, "latest"), m_dir / "elsewhere" / "moved_run");
  fs::remove_all(m_dir / "elsewhere");
  EXPECT_FALSE(resolve_run(results, "moved_run"));  // recorded, but its folder is gone
  EXPECT_FALSE(resolve_run(results, "latest"));     // the only run's folder is gone
}

TEST_F(History, ProcessesWritingAtOnceLoseNothing) {
  constexpr int k_procs = 4, k_each = 60;
  std::vector<pid_t> kids;
  for (int p = 0; p < k_procs; ++p) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int bad = 0;
      for (int i = 0; i < k_each; ++i) {
        auto db = HistoryDb::open(m_dir, true);  // each opens its own, as kvprof processes do
        if (!db || !(*db)->record(entry(fmt::format("p{}_{}", p, i), "m", p * 1000 + i))) ++bad;
      }
      ::_exit(bad == 0 ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (const pid_t pid : kids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto db = HistoryDb::open(m_dir, false);
  ASSERT_TRUE(db);
  EXPECT_EQ((*db)->list({})->size(), static_cast<size_t>(k_procs * k_each));
  EXPECT_EQ(user_version(), k_history_schema_version);
}

TEST_F(History, TwoKvprofProfilesAtOnceAreBothIndexedAndAMovedFolderIsReported) {
  const std::string results = (m_dir / "results").string();
  const auto profile = [&](const std::string& tag) {
    sys::CommandOptions o;
    o.timeout = 60s;
    o.env = {{"KVPROF_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}, {"KVPROF_URL", ""}};
    return sys::run_command({KVPROF_BIN, "profile",
                             "--sim",    "--output-dir",
                             results,    "--run-tag",
                             tag,        "--baseline-s",
                             "0.05",     "--post-warmup-s",
                             "0.05",     "--input-lens",
                             "64",       "--output-lens",
                             "4",        "--concurrencies",
                             "1,2",      "--prefix-modes",
                             "low",      "--min-condition-s",
                             "0",        "-q"},
                            o);
  };
  auto a = std::async(std::launch::async, profile, "one");
  auto b = std::async(std::launch::async, profile, "two");
  const auto ra = a.get(), rb = b.get();
  ASSERT_TRUE(ra && rb);
  ASSERT_EQ(ra->exit_code, 0) << ra->stderr_text;
  ASSERT_EQ(rb->exit_code, 0) << rb->stderr_text;
  EXPECT_EQ(ra->stderr_text.find("history"), std::string::npos) << ra->stderr_text;

  const auto runs = [&] {
    sys::CommandOptions o;
    auto r = sys::run_command({KVPROF_BIN, "runs", "--results-dir", results, "--json"}, o);
    EXPECT_TRUE(r && r->exit_code == 0);
    return nlohmann::json::parse(r->stdout_text);
  };
  nlohmann::json h = runs();
  ASSERT_EQ(h.at("n_entries"), 2);
  std::vector<std::string> tags;
  for (const auto& e : h.at("entries")) {
    EXPECT_EQ(e.at("kind"), "profile");
    EXPECT_EQ(e.at("status"), "completed");
    EXPECT_EQ(e.at("n_ok"), 3);
    EXPECT_TRUE(e.at("folder_exists").get<bool>());
    EXPECT_TRUE(fs::exists(fs::path(e.at("folder").get<std::string>()) / "summary.json"));
    tags.push_back(e.at("id").get<std::string>().substr(16));
  }
  std::sort(tags.begin(), tags.end());
  EXPECT_EQ(tags, (std::vector<std::string>{"one", "two"}));

  // One run folder deleted by hand: listed as missing, not an error.
  fs::remove_all(h.at("entries").at(0).at("folder").get<std::string>());
  h = runs();
  EXPECT_EQ(h.at("n_missing_folders"), 1);
  sys::CommandOptions o;
  auto text = sys::run_command({KVPROF_BIN, "runs", "--results-dir", results}, o);
  ASSERT_TRUE(text);
  EXPECT_EQ(text->exit_code, 0);
  EXPECT_NE(text->stdout_text.find("MISSING (moved or deleted)"), std::string::npos)
      << text->stdout_text;

  // The history lost (as a run whose record failed: the lock held too long, the disk full):
  // `kvprof runs` indexes the run folder it finds, as it was.
  fs::remove(fs::path(results) / k_history_db_file);
  fs::remove(fs::path(results) / (std::string(k_history_db_file) + "-wal"));
  fs::remove(fs::path(results) / (std::string(k_history_db_file) + "-shm"));
  text = sys::run_command({KVPROF_BIN, "runs", "--results-dir", results}, o);
  ASSERT_TRUE(text);
  EXPECT_EQ(text->exit_code, 0);
  EXPECT_NE(text->stderr_text.find("indexed 1 folder(s) the history lacked"), std::string::npos)
      << text->stderr_text;
  h = runs();
  ASSERT_EQ(h.at("n_entries"), 1);
  const auto& e = h.at("entries").at(0);
  EXPECT_EQ(e.at("kind"), "profile");
  EXPECT_EQ(e.at("status"), "completed");
  EXPECT_EQ(e.at("n_ok"), 3);
  EXPECT_TRUE(e.at("folder_exists").get<bool>());
  EXPECT_EQ(h.at("n_missing_folders"), 0);
}

// The run folders are the truth: a history SQLite cannot read (a corrupted file: "database disk
// image is malformed" made `kvprof runs` fail for good) is moved aside and rebuilt from the run
// folders and sweeps, with one warning; `kvprof runs --reindex` rebuilds it on request.
TEST_F(History, AnUnreadableHistoryIsRebuiltFromTheRunFoldersAndReindexRebuildsOnRequest) {
  const fs::path results = m_dir / "results";
  const fs::path run = results / "20250101_000000_old";
  fs::create_directories(run);
  for (const auto& e : fs::directory_iterator(fs::path(KVPROF_FIXTURES_DIR) / "profile_run_v1"))
    fs::copy_file(e.path(), run / e.path().filename());
  fs::create_directories(results / "sweeps" / "grid");
  std::ofstream(results / "sweeps" / "grid" / "sweep.json")
      << R"({"name": "grid", "status": "completed_with_failures", "first_started_unix_s": 5,
            "configurations": [{"model_id": "m1", "settings": {"engine": "vllm"},
                                "status": "done"},
                               {"model_id": "m2", "settings": {"engine": "vllm"},
                                "status": "failed"}]})";
  {
    auto db = HistoryDb::open(results, true);
    ASSERT_TRUE(db.has_value());
    HistoryEntry e = entry("lost", "m", 1);
    e.path = "nowhere";
    ASSERT_TRUE((*db)->record(e).has_value());
  }
  // A corrupted file: every page after the header overwritten.
  const fs::path file = results / k_history_db_file;
  for (const char* suffix : {"-wal", "-shm"})
    fs::remove(file.string() + suffix);
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 4096U);
  for (size_t i = 4096; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(i * 7);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;

  const auto runs = [&](std::vector<std::string> more) {
    std::vector<std::string> args = {KVPROF_BIN, "runs", "--results-dir", results.string(),
                                     "--json"};
    args.insert(args.end(), more.begin(), more.end());
    auto r = sys::run_command(args, {});
    EXPECT_TRUE(r.has_value());
    return r ? *r : sys::CommandResult{};
  };
  auto r = runs({});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("could not be read"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(fs::exists(file.string() + ".unreadable"));
  const auto ids = [](const std::string& text) {
    std::map<std::string, std::string> out;  // id -> status
    const auto listed = nlohmann::json::parse(text);
    for (const auto& e : listed.at("entries"))
      out[e.at("id").get<std::string>()] = e.at("status").get<std::string>();
    return out;
  };
  const std::map<std::string, std::string> rebuilt = {{"grid", "partial"},
                                                      {"20250101_000000_old", "completed"}};
  const auto old_id = nlohmann::json::parse(std::ifstream(run / "summary.json")).at("run_id");
  auto want = rebuilt;
  if (old_id != "20250101_000000_old") {
    want.erase("20250101_000000_old");
    want[old_id.get<std::string>()] = "completed";
  }
  EXPECT_EQ(ids(r.stdout_text), want) << r.stderr_text;
  // Indexed once, however often it is listed.
  EXPECT_EQ(ids(runs({}).stdout_text), want);

  // On request: the entry whose folder never existed is gone, the folders are indexed again.
  {
    auto db = HistoryDb::open(results, true);
    ASSERT_TRUE(db.has_value());
    HistoryEntry e = entry("lost", "m", 1);
    e.path = "nowhere";
    ASSERT_TRUE((*db)->record(e).has_value());
  }
  EXPECT_EQ(ids(runs({}).stdout_text).size(), 3U);
  r = runs({"--reindex"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("rebuilt from its folders: 2 indexed"), std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(ids(r.stdout_text), want);
}

}  // namespace
}  // namespace kvprof::results
