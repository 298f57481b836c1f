// One scrape as a record, and its row in metrics_trace.csv: monotonic and wall timestamps, the
// scrape status, then the canonical snapshot fields (an empty cell where a field is absent).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kvprof/metrics/snapshot.hpp"

namespace kvprof::metrics {

enum class ScrapeStatus {
  ok,           // 200 and parsed (lenient: skipped lines are counted, not fatal)
  http_error,   // an answer with another status (http_status says which)
  unreachable,  // no connection (refused, unresolvable)
  timeout,      // no complete answer within the timeout
  too_large,    // the body passed the size bound
  parse_error,  // the body broke a hard bound of the parser
  error,        // anything else
};

struct ScrapeRecord {
  int64_t mono_ns = 0;  // steady_clock when the answer (or the failure) arrived
  int64_t wall_ms = 0;  // system_clock, ms since the Unix epoch, at the same moment
  ScrapeStatus status = ScrapeStatus::error;
  long http_status = 0;                   // 0 when no answer
  double scrape_ms = 0.0;                 // from sending the request to the answer
  std::optional<uint64_t> skipped_lines;  // lenient parse: malformed lines skipped
  MetricsSnapshot snapshot;               // all fields absent unless status is ok
};

// The status cell: "ok", "http_404", "unreachable", "timeout", "too_large", "parse_error",
// "error".
std::string scrape_status_text(const ScrapeRecord& record);

// The CSV header line (no newline):
// mono_ns,wall_ms,status,scrape_ms,engine,kv_cache_usage,... (see trace_csv.cpp).
std::string trace_csv_header();

// The CSV row for `record` (no newline); absent fields are empty cells.
std::string format_trace_row(const ScrapeRecord& record);

}  // namespace kvprof::metrics
