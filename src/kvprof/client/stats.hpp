// Per-condition statistics of a request run: throughput, TTFT / ITL / E2E percentiles (all
// latencies from the intended send time), and failures by kind.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/client/request_record.hpp"

namespace kvprof::client {

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0, max = 0;
  uint64_t n = 0;  // samples; the other fields are 0 when n == 0
};

// Percentiles of `values` by linear interpolation between closest ranks (numpy's default);
// reorders `values`.
Percentiles percentiles(std::vector<double>& values);

struct ConditionStats {
  std::string condition_id;
  uint32_t concurrency = 0;
  uint64_t n_planned = 0;   // in the workload; 0 when not known
  uint64_t n_requests = 0;  // sent and ended (ok + error + cancelled)
  uint64_t n_ok = 0;
  uint64_t n_errors = 0;
  uint64_t n_cancelled = 0;
  uint64_t n_repeated = 0;              // of n_requests, repeats sent to reach min_condition_s
  uint64_t n_token_mismatches = 0;      // ok requests whose usage differs from what was asked
  uint64_t output_tokens = 0;           // completion tokens of ok requests
  double duration_s = 0;                // first intended send to last end
  double request_throughput_per_s = 0;  // ok requests / duration
  double output_tokens_per_s = 0;
  bool interrupted = false;             // the run was stopped while this condition ran
  Percentiles ttft_ms, itl_ms, e2e_ms;  // completed (ok) requests only
  std::map<std::string, uint64_t> errors_by_kind;
};

// Accumulates the records of one condition as they end; records are not kept.
class ConditionAccumulator {
 public:
  ConditionAccumulator(std::string condition_id, uint32_t concurrency);
  void add(const RequestRecord& record);
  // The statistics so far.
  [[nodiscard]] ConditionStats finish() const;
  // The condition's span so far as duration_s counts it: from the first request's intended send
  // to the last end; 0 before a request ended.
  [[nodiscard]] int64_t span_ns() const {
    return m_last_end_ns > m_first_intended_ns ? m_last_end_ns - m_first_intended_ns : 0;
  }

 private:
  ConditionStats m_stats;
  int64_t m_first_intended_ns = INT64_MAX;
  int64_t m_last_end_ns = INT64_MIN;
  std::vector<double> m_ttft_ms, m_itl_ms, m_e2e_ms;
};

// Planned requests that were never sent (0 when n_planned is not known); repeats do not count.
inline uint64_t n_not_sent(const ConditionStats& s) {
  const uint64_t sent = s.n_requests - std::min(s.n_repeated, s.n_requests);
  return s.n_planned > sent ? s.n_planned - sent : 0;
}

// The statistics as JSON (keys named with units; status "interrupted" or "completed"; the
// percentiles' values null when they have no sample).
nlohmann::json to_json(const ConditionStats& stats);

}  // namespace kvprof::client
