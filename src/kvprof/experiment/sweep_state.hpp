// What a sweep has done so far, kept in <output>/sweeps/<name>/sweep_state.json and rewritten
// (temporary file + rename) after every configuration, so a sweep that was stopped resumes: the
// configurations finished before are skipped, keyed by the fingerprint of their settings.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kvprof/util/error.hpp"

namespace kvprof::experiment {

// done: every request ended well; partial: finished, some requests failed; failed: the run could
// not happen or no request succeeded; interrupted: stopped by Ctrl-C; skipped: the plan says it
// cannot fit.
struct ConfigRecord {
  std::string fingerprint;
  std::string id;
  std::string label;
  std::string status;
  std::string reason;  // why it failed, was skipped or is partial
  std::string run_id;
  std::string run_dir;
  double started_unix_s = 0;
  double ended_unix_s = 0;
  double duration_s = 0;
  double expected_s = 0;
  uint32_t attempts = 0;
  nlohmann::json measured = nlohmann::json::object();  // figures from summary.json

  // True when a later run of the sweep skips it.
  [[nodiscard]] bool finished() const { return status == "done" || status == "partial"; }
};

struct SweepState {
  std::string name;
  std::string config_file;
  double first_started_unix_s = 0;
  std::map<std::string, ConfigRecord> records;  // by fingerprint

  // `status` per fingerprint, for the plan.
  [[nodiscard]] nlohmann::json status_by_fingerprint() const;
};

// A state file's text read from `source` (its path, for messages); an input error
// "SOURCE: not a sweep state file (why); move it away to start afresh" when it is not one.
Expected<SweepState> parse_state(std::string_view text, std::string_view source);

// The state file of the sweep in `dir`; an empty state when there is none; an input error naming
// the file when it is not a state file (it is left as it is).
Expected<SweepState> load_state(const std::filesystem::path& dir);

// Writes `state` to `dir`/sweep_state.json atomically; an io error.
Expected<void> save_state(const std::filesystem::path& dir, const SweepState& state);

// An exclusive lock on the sweep folder, held while a sweep runs in it.
class SweepLock {
 public:
  // Creates `dir` and locks it; a usage error when another kvprof sweep holds it, io otherwise.
  static Expected<std::unique_ptr<SweepLock>> acquire(const std::filesystem::path& dir);
  ~SweepLock();
  SweepLock(const SweepLock&) = delete;
  SweepLock& operator=(const SweepLock&) = delete;

 private:
  explicit SweepLock(int fd) : m_fd(fd) {}
  int m_fd = -1;
};

}  // namespace kvprof::experiment
