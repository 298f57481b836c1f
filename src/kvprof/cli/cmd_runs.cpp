// `kvprof runs`: the history of a results folder — every profile run, bench, sweep and comparison
// kvprof indexed there — newest first, filtered by model, engine, kind or time; a folder moved or
// deleted by hand is shown as missing.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>

#include "kvprof/cli/commands.hpp"
#include "kvprof/results/history_db.hpp"
#include "kvprof/results/history_entries.hpp"
#include "kvprof/util/clock.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/time_text.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::cli {

namespace {

namespace fs = std::filesystem;

struct RunsCliState {
  std::string results_dir = "results";
  results::HistoryFilter filter;
  std::string since;
  bool json = false;
  bool reindex = false;
};

// --since: "2025-01-31", "2025-01-31T14:05[:09]" (UTC) or "30m", "12h", "7d" ago.
double parse_since(const std::string& text) {
  const double now = unix_now_s();
  if (!text.empty() && std::string_view("smhdw").find(text.back()) != std::string_view::npos) {
    double n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size() - 1, n);
    if (ec == std::errc() && end == text.data() + text.size() - 1 && n >= 0) {
      const double unit = text.back() == 's'   ? 1
                          : text.back() == 'm' ? 60
                          : text.back() == 'h' ? 3600
                          : text.back() == 'd' ? 86400
                                               : 7 * 86400;
      return now - n * unit;
    }
  }
  std::tm tm{};
  for (const char* format :
       {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"}) {
    tm = {};
    const char* end = strptime(text.c_str(), format, &tm);
    if (end != nullptr && *end == '\0') return static_cast<double>(timegm(&tm));
  }
  throw Fatal({ErrorKind::usage, fmt::format("--since '{}': use a date (2025-01-31), a UTC time "
                                             "(2025-01-31T14:05) or an age (30m, 12h, 7d)",
                                             text)});
}

std::string utc_time(double unix_s) {
  return utc_time_text(unix_s, "%Y-%m-%d %H:%M:%S");
}

void run_runs_command(RunsCliState& st) {
  if (!st.since.empty()) st.filter.since_unix_s = parse_since(st.since);
  const fs::path results = st.results_dir;
  if (st.reindex) {
    const size_t n = value_or_fatal(results::reindex_history(results));
    std::fprintf(stderr, "kvprof: the history of %s was rebuilt from its folders: %zu indexed\n",
                 results.c_str(), n);
  }
  // Run folders whose record was missed (a busy lock, a full disk) are indexed now.
  if (auto added = results::index_unrecorded_runs(results); !added) {
    std::fprintf(stderr, "kvprof: warning: run folders the history lacks were not indexed: %s\n",
                 added.error().message.c_str());
  } else if (*added > 0 && !st.json) {
    std::fprintf(stderr, "kvprof: indexed %zu folder(s) the history lacked\n", *added);
  }
  auto db = results::HistoryDb::open(results, false);
  std::vector<results::HistoryEntry> entries;
  if (db) {
    entries = value_or_fatal((*db)->list(st.filter));
  } else if (db.error().kind != ErrorKind::not_found) {
    throw Fatal(db.error());
  }
  size_t n_missing = 0;
  std::vector<bool> exists;
  for (const auto& e : entries) {
    std::error_code ec;
    exists.push_back(fs::is_directory(results::entry_folder(results, e), ec));
    n_missing += exists.back() ? 0 : 1;
  }
  if (st.json) {
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto& e = entries[i];
      list.push_back({{"id", e.id},
                      {"kind", e.kind},
                      {"status", e.status},
                      {"model", e.model},
                      {"engine", e.engine},
                      {"gpu", e.gpu},
                      {"started_unix_s", e.started_unix_s},
                      {"started_at", utc_time(e.started_unix_s) + "Z"},
                      {"ended_unix_s", e.ended_unix_s},
                      {"folder", results::entry_folder(results, e).string()},
                      {"folder_exists", static_cast<bool>(exists[i])},
                      {"sweep", e.group},
                      {"peak_bytes", e.peak_bytes ? nlohmann::json(*e.peak_bytes) : nullptr},
                      {"n_requests", e.n_requests},
                      {"n_ok", e.n_ok},
                      {"n_errors", e.n_errors},
                      {"extra", e.extra}});
    }
    const nlohmann::json out = {{"schema_version", 1},
                                {"results_dir", results.string()},
                                {"n_entries", entries.size()},
                                {"n_missing_folders", n_missing},
                                {"entries", list}};
    std::printf("%s\n", json_text(out, 2).c_str());
    return;
  }
  if (entries.empty()) {
    std::printf("no %s in the history of %s\n", db ? "entries match" : "history yet",
                results.c_str());
    return;
  }
  int id_width = 2;
  for (const auto& e : entries)
    id_width = std::max(id_width, static_cast<int>(e.id.size()));
  std::printf("%-*s %-8s %-11s %-19s %-36s %-6s %9s %9s  %s\n", id_width, "id", "kind", "status",
              "started (UTC)", "model", "engine", "peak", "requests", "folder");
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    std::string model = e.model.size() > 36 ? e.model.substr(0, 33) + "..." : e.model;
    const std::string peak =
        e.peak_bytes ? fmt::format("{:.2f}G", bytes_to_gib(*e.peak_bytes)) : "-";
    const std::string reqs =
        e.n_requests > 0 ? fmt::format("{}/{}", e.n_ok, e.n_requests) : std::string("-");
    const std::string folder = exists[i] ? results::entry_folder(results, e).string()
                                         : "MISSING (moved or deleted): " + e.path;
    std::printf("%-*s %-8s %-11s %-19s %-36s %-6s %9s %9s  %s\n", id_width, e.id.c_str(),
                e.kind.c_str(), e.status.c_str(), utc_time(e.started_unix_s).c_str(), model.c_str(),
                e.engine.c_str(), peak.c_str(), reqs.c_str(), folder.c_str());
  }
  if (n_missing > 0) {
    std::printf("\n%zu folder(s) no longer where they were recorded\n", n_missing);
  }
}

}  // namespace

void register_runs_command(CLI::App& app) {
  auto st = std::make_shared<RunsCliState>();
  auto* cmd = app.add_subcommand(
      "runs",
      "List the history of a results folder: every profile run, bench, sweep and comparison "
      "recorded there (kvprof_history.sqlite), newest first; folders moved or deleted by hand "
      "are shown as missing");
  cmd->add_option("--results-dir,--output-dir", st->results_dir, "The results folder")
      ->envname("KVPROF_OUTPUT_DIR")
      ->capture_default_str();
  cmd->add_option("--model", st->filter.model, "Only models containing this text");
  cmd->add_option("--engine", st->filter.engine, "Only this engine (vllm, llamacpp, ...)");
  cmd->add_option("--kind", st->filter.kind, "Only this kind: profile, bench, sweep, compare ...");
  cmd->add_option("--sweep", st->filter.group, "Only the runs of this sweep");
  cmd->add_option("--since", st->since,
                  "Only since a date (2025-01-31), a UTC time (2025-01-31T14:05) or an age "
                  "(30m, 12h, 7d)");
  cmd->add_option("--limit", st->filter.limit, "At most this many, newest first (0: all)")
      ->capture_default_str();
  cmd->add_flag("--json", st->json, "Print JSON");
  cmd->add_flag("--reindex", st->reindex,
                "Rebuild the history from the run folders and sweeps in the results folder (they "
                "are the truth; an unreadable history is rebuilt by itself)");
  cmd->callback([st] { run_runs_command(*st); });
}

}  // namespace kvprof::cli
