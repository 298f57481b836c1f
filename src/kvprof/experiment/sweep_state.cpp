// The sweep's state file and lock (see sweep_state.hpp).
#include "kvprof/experiment/sweep_state.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "kvprof/experiment/sweep_config.hpp"
#include "kvprof/profile/manifest.hpp"
#include "kvprof/util/atomic_file.hpp"
#include "kvprof/util/json_input.hpp"
#include "kvprof/util/json_text.hpp"

namespace kvprof::experiment {

namespace fs = std::filesystem;

namespace {

constexpr const char* k_state_file = "sweep_state.json";
constexpr const char* k_conditions_dir = "conditions";
constexpr int k_state_schema = 2;  // 1: the figures inline as "measured" (still read)
constexpr uint64_t k_max_state_bytes = 64ull << 20;
constexpr uint64_t k_max_conditions_bytes = 16ull << 20;

using results::ConditionSummary;
using results::RunSummary;

template <class T>
std::optional<double> figure(const std::optional<T>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

// A latency or rate of a condition: none when no request of it was answered.
std::optional<double> answered(const ConditionSummary& c, double v) {
  return c.n_ok > 0 ? std::optional<double>(v) : std::nullopt;
}

constexpr ConditionField k_condition_fields[] = {
    {"peak_used_bytes", &ConditionFigures::peak_used_bytes,
     [](const ConditionSummary& c) { return figure(c.peak_used_bytes); }},
    {"peak_rss_bytes", &ConditionFigures::peak_rss_bytes,
     [](const ConditionSummary& c) { return figure(c.peak_rss_bytes); }},
    {"peak_kv_cache_usage", &ConditionFigures::peak_kv_cache_usage,
     [](const ConditionSummary& c) { return c.peak_kv_cache_usage; }},
    {"ttft_p50_ms", &ConditionFigures::ttft_p50_ms,
     [](const ConditionSummary& c) { return answered(c, c.ttft_p50_ms); }},
    {"e2e_mean_ms", &ConditionFigures::e2e_mean_ms,
     [](const ConditionSummary& c) { return c.e2e_mean_ms; }},
    {"output_tokens_per_s", &ConditionFigures::output_tokens_per_s,
     [](const ConditionSummary& c) { return answered(c, c.output_tokens_per_s); }},
    {"preemptions", &ConditionFigures::preemptions,
     [](const ConditionSummary& c) { return figure(c.preemptions); }},
    {"n_ok", &ConditionFigures::n_ok,
     [](const ConditionSummary& c) { return std::optional<double>(c.n_ok); }},
    {"n_errors", &ConditionFigures::n_errors,
     [](const ConditionSummary& c) { return std::optional<double>(c.n_errors); }}};

// A figure of the GPUs sampled: none when the run sampled host memory only.
std::optional<double> gpu_figure(const RunSummary& r, const std::optional<uint64_t>& v) {
  return r.memory == "GPU" ? figure(v) : std::nullopt;
}

// A measured component, else the engine's own figure on a server whose parts only it states.
std::optional<double> component(const RunSummary& r, const std::string& name) {
  if (const auto it = r.measured.find(name); it != r.measured.end() && it->second.bytes)
    return figure(it->second.bytes);
  if (r.memory == "GPU") return std::nullopt;
  const auto it = r.reported.find(name);
  return it == r.reported.end() ? std::nullopt : std::optional<double>(it->second);
}

constexpr RunField k_run_fields[] = {
    {"peak_used_bytes", &RunFigures::peak_used_bytes,
     [](const RunSummary& r) { return gpu_figure(r, r.peak_bytes); }, true},
    {"peak_rss_bytes", &RunFigures::peak_rss_bytes,
     [](const RunSummary& r) { return figure(r.host_peak_rss_bytes); }, true},
    {"baseline_used_bytes", &RunFigures::baseline_used_bytes,
     [](const RunSummary& r) { return gpu_figure(r, r.baseline_bytes); }, false},
    {"weights_bytes", &RunFigures::weights_bytes,
     [](const RunSummary& r) { return component(r, "weights"); }, false},
    {"kv_cache_bytes", &RunFigures::kv_cache_bytes,
     [](const RunSummary& r) { return component(r, "kv_cache"); }, false},
    {"tokens_per_second", &RunFigures::tokens_per_second,
     [](const RunSummary& r) { return std::optional<double>(r.tokens_per_s); }, false}};

std::optional<double> number_in(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

nlohmann::json record_json(const ConfigRecord& r) {
  nlohmann::json figures = nlohmann::json::object();
  for (const auto& f : k_run_fields)
    figures[f.name] = figure_json(r.figures.*f.member);
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& run : r.runs)
    runs.push_back({{"run_id", run.run_id}, {"run_dir", run.run_dir}});
  return {{"fingerprint", r.fingerprint},
          {"id", r.id},
          {"label", r.label},
          {"status", r.status},
          {"reason", r.reason},
          {"run_id", r.run_id},
          {"run_dir", r.run_dir},
          {"started_unix_s", r.started_unix_s},
          {"ended_unix_s", r.ended_unix_s},
          {"duration_s", r.duration_s},
          {"expected_s", r.expected_s},
          {"attempts", r.attempts},
          {"job_id", r.job_id},
          {"node", r.node},
          {"figures", figures},
          {"runs", runs},
          {"n_conditions", r.conditions.size()}};
}

// A schema-1 record's "measured" object: the run's figures and each condition's, one run.
void read_measured(const nlohmann::json& m, ConfigRecord& r) {
  for (const auto& f : k_run_fields)
    r.figures.*f.member = number_in(m, f.name);
  if (!r.run_id.empty()) r.runs.push_back({r.run_id, r.run_dir});
  const auto c = m.find("conditions");
  if (c == m.end() || !c->is_object()) return;
  for (const auto& [cid, v] : c->items()) {
    if (!v.is_object() || r.conditions.size() >= k_max_conditions_per_entry) continue;
    ConditionFigures cf;
    for (const auto& f : k_condition_fields)
      cf.*f.member = number_in(v, f.name);
    r.conditions[cid] = cf;
  }
}

ConfigRecord record_from(const nlohmann::json& j) {
  ConfigRecord r;
  r.fingerprint = j.at("fingerprint").get<std::string>();
  r.id = j.value("id", "");
  r.label = j.value("label", "");
  r.status = j.at("status").get<std::string>();
  r.reason = j.value("reason", "");
  r.run_id = j.value("run_id", "");
  r.run_dir = j.value("run_dir", "");
  r.started_unix_s = j.value("started_unix_s", 0.0);
  r.ended_unix_s = j.value("ended_unix_s", 0.0);
  r.duration_s = j.value("duration_s", 0.0);
  r.expected_s = j.value("expected_s", 0.0);
  r.attempts = j.value("attempts", 0u);
  r.job_id = j.value("job_id", "");
  r.node = j.value("node", "");
  if (j.contains("measured") && j.at("measured").is_object()) read_measured(j.at("measured"), r);
  if (j.contains("figures") && j.at("figures").is_object()) {
    for (const auto& f : k_run_fields)
      r.figures.*f.member = number_in(j.at("figures"), f.name);
  }
  if (j.contains("runs") && j.at("runs").is_array()) {
    r.runs.clear();
    for (const auto& run : j.at("runs")) {
      if (r.runs.size() >= k_max_runs_per_configuration) break;
      r.runs.push_back({run.at("run_id").get<std::string>(), run.value("run_dir", "")});
    }
  }
  return r;
}

// A fingerprint names a file: 1 to 64 of [0-9a-zA-Z].
bool file_name_safe(const std::string& fingerprint) {
  return !fingerprint.empty() && fingerprint.size() <= 64 &&
         std::ranges::all_of(fingerprint,
                             [](char c) { return std::isalnum(static_cast<unsigned char>(c)); });
}

fs::path conditions_path(const fs::path& dir, const std::string& fingerprint) {
  return dir / k_conditions_dir / (fingerprint + ".json");
}

Expected<std::string> read_bounded(const fs::path& path, uint64_t max_bytes, const char* what) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size > max_bytes) {
    return fail(ErrorKind::input,
                fmt::format("{}: not a {} (too large or unreadable); move it away to start afresh",
                            path.string(), what));
  }
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// One configuration's conditions as JSON text: a row per condition, written as it goes.
void write_conditions(std::ostream& out, const ConfigRecord& r) {
  out << "{\"schema_version\": 1, \"fingerprint\": " << nlohmann::json(r.fingerprint).dump()
      << ",\n \"columns\": [\"condition_id\", \"run\", \"completed\"";
  for (const auto& f : k_condition_fields)
    out << ", \"" << f.name << '"';
  out << "],\n \"rows\": [";
  bool first = true;
  std::string row;
  for (const auto& [cid, c] : r.conditions) {
    row = fmt::format("{}\n  [{}, {}, {}", first ? "" : ",", json_text(cid), c.run,
                      c.completed ? "true" : "false");
    for (const auto& f : k_condition_fields) {
      const auto& v = c.*f.member;
      row += ", " + json_text(figure_json(v));
    }
    row += ']';
    out << row;
    first = false;
  }
  out << "]}\n";
}

}  // namespace

nlohmann::json figure_json(const std::optional<double>& v) {
  if (!v) return nullptr;
  if (std::trunc(*v) == *v && std::fabs(*v) < 9.007199254740992e15) return static_cast<int64_t>(*v);
  return *v;
}

std::span<const ConditionField> condition_fields() {
  return k_condition_fields;
}

std::span<const RunField> run_fields() {
  return k_run_fields;
}

std::set<std::string> ConfigRecord::completed_conditions() const {
  std::set<std::string> out;
  for (const auto& [cid, c] : conditions) {
    if (c.completed && c.n_ok.value_or(0) > 0) out.insert(cid);
  }
  return out;
}

void take_run(const results::RunSummary& summary, const RunRef& run, ConfigRecord& record) {
  if (record.runs.size() >= k_max_runs_per_configuration) {
    // The oldest run's conditions are credited to the next oldest (a thousand resumes in).
    record.runs.erase(record.runs.begin());
    for (auto& [cid, c] : record.conditions)
      c.run = c.run > 0 ? c.run - 1 : 0;
  }
  record.runs.push_back(run);
  record.run_id = run.run_id;
  record.run_dir = run.run_dir;
  const auto index = static_cast<uint16_t>(record.runs.size() - 1);
  for (const auto& f : k_run_fields) {
    auto& kept = record.figures.*f.member;
    const auto now = f.from(summary);
    if (!f.peak) {
      kept = now;
    } else if (now && (!kept || *now > *kept)) {
      kept = now;
    }
  }
  for (const auto& c : summary.conditions) {
    if (c.id.empty()) continue;
    ConditionFigures f;
    for (const auto& field : k_condition_fields)
      f.*field.member = field.from(c);
    f.run = index;
    f.completed = c.completed;
    record.conditions[c.id] = f;
  }
}

nlohmann::json SweepState::status_by_fingerprint() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [fp, r] : records)
    out[fp] = r.status;
  return out;
}

Expected<SweepState> parse_state(std::string_view text, std::string_view source) {
  const auto not_a_state = [&](const Error& e) -> Expected<SweepState> {
    std::string why = e.message;
    if (why.starts_with(std::string(source) + ": ")) why.erase(0, source.size() + 2);
    return fail(
        ErrorKind::input,
        fmt::format("{}: not a sweep state file ({}); move it away to start afresh", source, why));
  };
  const auto j = parse_json_input(text, source);
  if (!j) return not_a_state(j.error());
  auto state = read_json_input(source, [&]() -> Expected<SweepState> {
    const int schema = j->is_object() ? j->value("schema_version", 0) : 0;
    if (schema != 1 && schema != k_state_schema) {
      return fail(ErrorKind::input, fmt::format("no schema_version 1 or {}", k_state_schema));
    }
    SweepState out;
    out.name = j->value("name", "");
    out.config_file = j->value("config_file", "");
    out.first_started_unix_s = j->value("first_started_unix_s", 0.0);
    const auto& configurations = j->at("configurations");
    if (!configurations.is_array()) return fail(ErrorKind::input, "configurations is not a list");
    for (const auto& r : configurations) {
      auto rec = record_from(r);
      out.records[rec.fingerprint] = std::move(rec);
    }
    return out;
  });
  if (!state) return not_a_state(state.error());
  return state;
}

Expected<void> parse_conditions(std::string_view text, std::string_view source,
                                ConfigRecord& record) {
  const auto not_conditions = [&](const Error& e) -> Expected<void> {
    std::string why = e.message;
    if (why.starts_with(std::string(source) + ": ")) why.erase(0, source.size() + 2);
    return fail(ErrorKind::input,
                fmt::format("{}: not a sweep conditions file ({}); move the sweep's folder away "
                            "to start afresh",
                            source, why));
  };
  const auto j = parse_json_input(text, source);
  if (!j) return not_conditions(j.error());
  auto read = read_json_input(source, [&]() -> Expected<void> {
    if (!j->is_object() || j->value("schema_version", 0) != 1) {
      return fail(ErrorKind::input, "no schema_version 1");
    }
    if (j->at("fingerprint").get<std::string>() != record.fingerprint) {
      return fail(ErrorKind::input, "it is another configuration's");
    }
    // The columns after condition_id, run and completed name the figures, in any order.
    std::vector<const ConditionField*> columns;
    const auto& names = j->at("columns");
    if (!names.is_array() || names.size() < 3 || names.size() > 64) {
      return fail(ErrorKind::input, "columns is not a list of names");
    }
    for (size_t i = 3; i < names.size(); ++i) {
      const std::string name = names[i].get<std::string>();
      const auto it = std::ranges::find_if(k_condition_fields,
                                           [&](const ConditionField& f) { return name == f.name; });
      columns.push_back(it == std::end(k_condition_fields) ? nullptr : &*it);
    }
    const auto& rows = j->at("rows");
    if (!rows.is_array() || rows.size() > k_max_conditions_per_entry) {
      return fail(ErrorKind::input,
                  fmt::format("rows is not a list of at most {}", k_max_conditions_per_entry));
    }
    std::map<std::string, ConditionFigures> conditions;
    for (const auto& row : rows) {
      if (!row.is_array() || row.size() != names.size()) {
        return fail(ErrorKind::input, "a row does not have one value per column");
      }
      ConditionFigures c;
      const auto run = row[1].get<uint64_t>();
      if (run >= std::max<size_t>(record.runs.size(), 1)) {
        return fail(ErrorKind::input, fmt::format("run {} is not one of the state's", run));
      }
      c.run = static_cast<uint16_t>(run);
      c.completed = row[2].get<bool>();
      for (size_t i = 0; i < columns.size(); ++i) {
        if (columns[i] == nullptr || row[i + 3].is_null()) continue;
        c.*columns[i]->member = row[i + 3].get<double>();
      }
      conditions[row[0].get<std::string>()] = c;
    }
    record.conditions = std::move(conditions);
    return {};
  });
  if (!read) return not_conditions(read.error());
  return {};
}

Expected<SweepState> load_state(const fs::path& dir) {
  const fs::path path = dir / k_state_file;
  std::error_code ec;
  if (!fs::exists(path, ec)) return SweepState{};
  const auto text = read_bounded(path, k_max_state_bytes, "sweep state file");
  if (!text) return std::unexpected(text.error());
  auto state = parse_state(*text, path.string());
  if (!state) return state;
  for (auto& [fp, r] : state->records) {
    const fs::path file = conditions_path(dir, fp);
    if (!file_name_safe(fp) || !fs::exists(file, ec)) continue;
    const auto conditions = read_bounded(file, k_max_conditions_bytes, "sweep conditions file");
    if (!conditions) return std::unexpected(conditions.error());
    if (auto ok = parse_conditions(*conditions, file.string(), r); !ok)
      return std::unexpected(ok.error());
  }
  return state;
}

Expected<void> save_state(const fs::path& dir, const SweepState& state,
                          const std::string* fingerprint) {
  bool any_conditions = false;
  for (const auto& [fp, r] : state.records) {
    if (fingerprint != nullptr && fp != *fingerprint) continue;
    if (r.conditions.empty()) {
      // A configuration started afresh: no earlier run's conditions are read back for it.
      std::error_code ignored;
      if (file_name_safe(fp)) fs::remove(conditions_path(dir, fp), ignored);
      continue;
    }
    if (!file_name_safe(fp)) {
      return fail(ErrorKind::io, fmt::format("a configuration's fingerprint '{}' cannot name a "
                                             "file",
                                             fp));
    }
    if (!any_conditions) {
      std::error_code ec;
      fs::create_directories(dir / k_conditions_dir, ec);
      if (ec) {
        return fail(ErrorKind::io, fmt::format("cannot write {}: {}",
                                               (dir / k_conditions_dir).string(), ec.message()));
      }
      any_conditions = true;
    }
    auto ok = write_file_atomically(conditions_path(dir, fp),
                                    [&r](std::ostream& out) { write_conditions(out, r); });
    if (!ok) return ok;
  }
  nlohmann::json j = {{"schema_version", k_state_schema},
                      {"name", state.name},
                      {"config_file", state.config_file},
                      {"first_started_unix_s", state.first_started_unix_s},
                      {"configurations", nlohmann::json::array()}};
  for (const auto& [fp, r] : state.records)
    j["configurations"].push_back(record_json(r));
  return profile::write_json_file(dir / k_state_file, j);
}

Expected<std::unique_ptr<SweepLock>> SweepLock::acquire(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(ErrorKind::io, fmt::format("{}: {}", dir.string(), ec.message()));
  const fs::path path = dir / ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return fail(ErrorKind::io, fmt::format("{}: {}", path.string(), std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return fail(ErrorKind::usage,
                  fmt::format("another kvprof sweep is running in {}", dir.string()));
    }
    return fail(ErrorKind::io, fmt::format("{}: {}", path.string(), std::strerror(err)));
  }
  return std::unique_ptr<SweepLock>(new SweepLock(fd));
}

SweepLock::~SweepLock() {
  if (m_fd >= 0) ::close(m_fd);
}

}  // namespace kvprof::experiment
