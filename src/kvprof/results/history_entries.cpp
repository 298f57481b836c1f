// History entries from run summaries (see entries.hpp).
#include "kvprof/results/history_entries.hpp"

#include <set>

#include "kvprof/sys/proc.hpp"
#include "kvprof/util/json_input.hpp"

namespace kvprof::results {

namespace {

using nlohmann::json;

// The value at `pointer` when it has type T, else `fallback`.
template <class T>
T at_or(const json& j, const char* pointer, T fallback) {
  const json::json_pointer p(pointer);
  if (!j.contains(p)) return fallback;
  const json& v = j.at(p);
  if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string() ? v.get<std::string>() : fallback;
  } else if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean() ? v.get<bool>() : fallback;
  } else {
    return v.is_number() ? v.get<T>() : fallback;
  }
}

}  // namespace

std::string run_status(bool interrupted, uint64_t n_requests, uint64_t n_ok, uint64_t n_errors) {
  if (interrupted) return "interrupted";
  if (n_requests > 0 && n_ok == 0) return "failed";
  if (n_errors > 0) return "partial";
  return "completed";
}

HistoryEntry profile_entry(const json& summary, const std::filesystem::path& run_dir,
                           const std::string& group) {
  HistoryEntry e;
  e.kind = "profile";
  e.id = at_or<std::string>(summary, "/run_id", run_dir.filename().string());
  e.model = at_or<std::string>(summary, "/model_info/name", "");
  e.engine = at_or<std::string>(summary, "/engine_metadata/engine_type", "");
  e.gpu = at_or<std::string>(summary, "/gpus/0/name", "");
  e.started_unix_s = at_or<double>(summary, "/metadata/started_unix_s", 0.0);
  e.ended_unix_s = e.started_unix_s + at_or<double>(summary, "/metadata/duration_s", 0.0);
  e.path = run_dir.string();
  e.group = group;
  const double peak = at_or<double>(summary, "/memory_measurements/peak/total_bytes", -1.0);
  if (peak >= 0) e.peak_bytes = static_cast<uint64_t>(peak);
  e.n_requests = at_or<uint64_t>(summary, "/requests/n_requests", 0);
  e.n_ok = at_or<uint64_t>(summary, "/requests/n_ok", 0);
  e.n_errors = at_or<uint64_t>(summary, "/requests/n_errors", 0);
  e.status =
      run_status(at_or<bool>(summary, "/interrupted", false), e.n_requests, e.n_ok, e.n_errors);
  e.extra = {{"simulated", at_or<bool>(summary, "/simulated", false)},
             {"endpoint", at_or<std::string>(summary, "/metadata/endpoint", "")},
             {"memory_source", at_or<std::string>(summary, "/memory_source", "")},
             {"tokens_per_second", at_or<double>(summary, "/latency_stats/tokens_per_second", 0)}};
  return e;
}

HistoryEntry bench_entry_from_summary(const json& summary, const std::filesystem::path& run_dir) {
  HistoryEntry e;
  e.kind = "bench";
  e.id = at_or<std::string>(summary, "/run_id", run_dir.filename().string());
  e.model =
      std::filesystem::path(at_or<std::string>(summary, "/settings/model", "")).filename().string();
  e.engine = "llamacpp";
  const std::string status = at_or<std::string>(summary, "/status", "");
  e.status = status == "crashed" ? "failed" : status;
  e.path = run_dir.string();
  const double peak = at_or<double>(summary, "/host_memory/peak_rss_bytes", -1.0);
  if (peak >= 0) e.peak_bytes = static_cast<uint64_t>(peak);
  e.extra = {{"peak_bytes_is", "host RSS of the engine process"},
             {"error", at_or<std::string>(summary, "/error", "")}};
  return e;
}

Expected<size_t> index_unrecorded_runs(const std::filesystem::path& results_dir) {
  namespace fs = std::filesystem;
  constexpr size_t k_max_summary_bytes = 64U << 20;
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
    auto text = sys::read_text_file((folder / "summary.json").string(), k_max_summary_bytes);
    if (!text) continue;  // unreadable: nothing to index
    auto summary = parse_json_input(*text, (folder / "summary.json").string());
    if (!summary || !summary->is_object() || !summary->contains("run_id")) continue;
    const bool bench = at_or<std::string>(*summary, "/kind", "") == "bench";
    const HistoryEntry e =
        bench ? bench_entry_from_summary(*summary, folder) : profile_entry(*summary, folder);
    auto done = (*db)->record(e);
    if (!done) return std::unexpected(done.error());
    ++added;
  }
  return added;
}

}  // namespace kvprof::results
