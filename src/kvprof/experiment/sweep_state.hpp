// What a sweep has done so far, kept in <output>/sweeps/<name>/sweep_state.json (and the figures
// of each configuration's conditions in conditions/<fingerprint>.json) and rewritten (temporary
// file + rename) after every configuration, so a sweep that was stopped resumes: the
// configurations finished before are skipped, keyed by the fingerprint of their settings, and an
// interrupted one runs only the conditions it had not finished.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/results/run_summary.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::experiment {

// A configuration interrupted and resumed again and again keeps at most this many runs.
inline constexpr size_t k_max_runs_per_configuration = 1000;

// What one condition of a configuration measured (from its run's summary); absent: not measured.
struct ConditionFigures {
  std::optional<double> peak_used_bytes{}, peak_rss_bytes{}, peak_kv_cache_usage{}, ttft_p50_ms{},
      e2e_mean_ms{}, output_tokens_per_s{}, preemptions{}, n_ok{}, n_errors{};
  uint16_t run = 0;       // the run that measured it: an index into ConfigRecord::runs
  bool completed = true;  // false: the run was stopped while it ran (a resumed sweep runs it again)
};

// The figures of ConditionFigures by their names in the sweep's files, in the order files list
// them, and how each is taken from a condition of a run's typed summary.
struct ConditionField {
  const char* name;
  std::optional<double> ConditionFigures::*member;
  std::optional<double> (*from)(const results::ConditionSummary&);
};
std::span<const ConditionField> condition_fields();

// What a configuration's run measured as a whole (of its last run, peaks over all its runs).
struct RunFigures {
  std::optional<double> peak_used_bytes{}, peak_rss_bytes{}, baseline_used_bytes{}, weights_bytes{},
      kv_cache_bytes{}, tokens_per_second{};
};
struct RunField {
  const char* name;
  std::optional<double> RunFigures::*member;
  std::optional<double> (*from)(const results::RunSummary&);
  bool peak;  // a resumed configuration keeps the highest of its runs
};
std::span<const RunField> run_fields();

// A figure as JSON: null when absent, whole numbers (bytes, counts) as integers.
nlohmann::json figure_json(const std::optional<double>& v);

// One run folder of a configuration (a resumed configuration has several).
struct RunRef {
  std::string run_id;
  std::string run_dir;
};

// done: every request ended well; partial: finished, some requests failed; failed: the run could
// not happen or no request succeeded; interrupted: stopped by Ctrl-C; skipped: the plan says it
// cannot fit; queued, running: its job is in a cluster's queue or running there.
struct ConfigRecord {
  std::string fingerprint;
  std::string id;
  std::string label;
  std::string status;
  std::string reason;  // why it failed, was skipped or is partial
  std::string run_id;  // the latest run (also runs.back() once it measured anything)
  std::string run_dir;
  double started_unix_s = 0;
  double ended_unix_s = 0;
  double duration_s = 0;
  double expected_s = 0;
  uint32_t attempts = 0;
  std::string job_id;  // on a cluster: the scheduler's job of its latest attempt
  std::string node;    // where that job ran
  RunFigures figures;
  std::vector<RunRef> runs;  // the runs whose conditions are kept, oldest first
  std::map<std::string, ConditionFigures> conditions;  // by condition id

  // True when a later run of the sweep skips it.
  [[nodiscard]] bool finished() const { return status == "done" || status == "partial"; }
  // The conditions measured to their end with a request answered: a resumed run (of a
  // configuration interrupted, or failed on the way) leaves them out.
  [[nodiscard]] std::set<std::string> completed_conditions() const;
};

struct SweepState {
  std::string name;
  std::string config_file;
  double first_started_unix_s = 0;
  std::map<std::string, ConfigRecord> records;  // by fingerprint

  // `status` per fingerprint, for the plan.
  [[nodiscard]] nlohmann::json status_by_fingerprint() const;
};

// Takes what a run of `record`'s configuration measured from its summary: the run joins
// `runs` (and becomes run_id/run_dir), the conditions it ran replace those of earlier runs, run
// figures are its own but for peaks, the highest over the runs kept.
void take_run(const results::RunSummary& summary, const RunRef& run, ConfigRecord& record);

// A state file's text read from `source` (its path, for messages); an input error
// "SOURCE: not a sweep state file (why); move it away to start afresh" when it is not one.
Expected<SweepState> parse_state(std::string_view text, std::string_view source);

// A conditions file's text (see save_state) read into `record`; an input error naming `source`.
Expected<void> parse_conditions(std::string_view text, std::string_view source,
                                ConfigRecord& record);

// The state file of the sweep in `dir` with each configuration's conditions file; an empty state
// when there is none; an input error naming the file when one is not what kvprof wrote (it is
// left as it is).
Expected<SweepState> load_state(const std::filesystem::path& dir);

// Writes `state` to `dir`/sweep_state.json and each configuration's figures per condition to
// `dir`/conditions/<fingerprint>.json (only `fingerprint`'s when given: the others are unchanged;
// a configuration without conditions loses its file), each atomically; an io error. Memory and
// time are linear in the conditions written.
Expected<void> save_state(const std::filesystem::path& dir, const SweepState& state,
                          const std::string* fingerprint = nullptr);

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
