// History entries from run summaries (see entries.hpp).
#include "kvprof/history/entries.hpp"

namespace kvprof::history {

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

Entry profile_entry(const json& summary, const std::filesystem::path& run_dir,
                    const std::string& group) {
  Entry e;
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

}  // namespace kvprof::history
