// What `kvprof profile` says while the grid runs: a status line after every request (the
// condition's counts, the grid's requests done and its ETA) and one line when a condition ends
// or is cut short by Ctrl-C (then marked INTERRUPTED with what completed, was cancelled and was
// never sent — the same counts summary.json and request_trace.csv hold).
#pragma once

#include <cstdint>
#include <string>

#include "kvprof/client/runner.hpp"

namespace kvprof::profile {

class GridProgress {
 public:
  // For a grid of `n_requests` requests whose first condition starts at `start_ns` (monotonic).
  GridProgress(uint64_t n_requests, int64_t start_ns);

  // Takes the runner's report `p` at monotonic time `now_ns`.
  void update(const client::Progress& p, int64_t now_ns);
  // True when `p` is a condition's last report (all its requests ended, or the run was stopped).
  [[nodiscard]] static bool condition_ended(const client::Progress& p);
  // "[2/6] in512_out32_c8_low: 3/8 ok, 1 error; grid 11/48 requests, ETA 12s".
  [[nodiscard]] std::string status_text(const client::Progress& p) const;
  // The line for a condition's last report, after `seconds` of it: counts, `memory` and `kv`
  // (already formatted; both empty: left out), and the grid's ETA; INTERRUPTED with cancelled and
  // not-sent counts when the run was stopped in it.
  [[nodiscard]] std::string end_text(const client::Progress& p, double seconds,
                                     const std::string& memory, const std::string& kv) const;

 private:
  [[nodiscard]] std::string count_text() const;
  [[nodiscard]] std::string eta() const;

  uint64_t m_n_requests;
  int64_t m_start_ns;
  int64_t m_now_ns;
  uint64_t m_done_before = 0;        // requests ended in the conditions before the current one
  uint64_t m_done = 0;               // requests ended in all conditions so far
  uint64_t m_repeats_before = 0;     // requests repeated (--min-condition-s) before this condition
  uint64_t m_repeats = 0;            // ... so far
  uint64_t m_condition_planned = 0;  // the current condition's own requests
  uint64_t m_planned_done_before = 0;  // the grid's own requests ended before this condition
  uint64_t m_planned_done = 0;         // ... so far (repeats not counted)
};

}  // namespace kvprof::profile
