// The sweep's state file and lock (see sweep_state.hpp).
#include "kvprof/experiment/sweep_state.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "kvprof/profile/manifest.hpp"
#include "kvprof/util/json_input.hpp"

namespace kvprof::experiment {

namespace fs = std::filesystem;

namespace {

constexpr const char* k_state_file = "sweep_state.json";
constexpr uint64_t k_max_state_bytes = 64ull << 20;

nlohmann::json record_json(const ConfigRecord& r) {
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
          {"measured", r.measured}};
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
  if (j.contains("measured") && j.at("measured").is_object()) r.measured = j.at("measured");
  return r;
}

}  // namespace

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
    if (!j->is_object() || j->value("schema_version", 0) != 1) {
      return fail(ErrorKind::input, "no schema_version 1");
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

Expected<SweepState> load_state(const fs::path& dir) {
  const fs::path path = dir / k_state_file;
  std::error_code ec;
  if (!fs::exists(path, ec)) return SweepState{};
  const auto size = fs::file_size(path, ec);
  if (ec || size > k_max_state_bytes) {
    return fail(ErrorKind::input, fmt::format("{}: not a sweep state file (too large or "
                                              "unreadable); move it away to start afresh",
                                              path.string()));
  }
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  return parse_state(text, path.string());
}

Expected<void> save_state(const fs::path& dir, const SweepState& state) {
  nlohmann::json j = {{"schema_version", 1},
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
