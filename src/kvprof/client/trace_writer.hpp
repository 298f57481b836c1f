// request_trace.csv: one row per request, appended and flushed as each request ends, so a
// stopped or crashed run keeps every row written so far.
//
// Columns (times are Unix epoch seconds with microseconds, taken on the monotonic clock and
// anchored to the wall clock once when the run starts; empty when the event did not happen):
//   request_id, condition_id     from workload.jsonl
//   status                       ok | error | cancelled
//   error_kind                   empty | connect | reset | timeout | http_4xx | http_429 |
//                                http_5xx | malformed_sse | server_error | cancelled | other
//   http_status                  0 when no response arrived
//   input_len, max_tokens        what was asked
//   prompt_tokens, completion_tokens   the server's usage (empty when it sent none)
//   tokens_streamed              tokens counted from the streamed chunks
//   intended_send_unix_s         from the schedule (closed loop: when a slot freed)
//   actual_send_unix_s, first_token_unix_s, end_unix_s
//   send_delay_ms                actual - intended send
//   ttft_ms, e2e_ms              from the INTENDED send (no coordinated omission); e2e_ms is
//                                empty for a cancelled request (it did not complete)
//   itl_mean_ms                  mean gap between token chunks per token
//   finish_reason
//   token_times_ms               each token chunk's arrival, ms after the intended send,
//                                ';'-separated; "12.345x3" is a chunk of 3 tokens
//   warning                      e.g. completion_tokens differ from max_tokens
//   error                        one line from the transport or server
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

#include "kvprof/client/request_record.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::client {

class TraceWriter {
 public:
  // Creates (truncates) `path` and writes the header row; an io error when it cannot.
  static Expected<TraceWriter> open(const std::filesystem::path& path, double run_start_unix_s,
                                    bool token_times = true);
  TraceWriter(TraceWriter&& other) noexcept;
  TraceWriter& operator=(TraceWriter&&) = delete;
  ~TraceWriter();

  // Appends one row and flushes; an io error when the write fails (e.g. disk full).
  Expected<void> write(const RequestRecord& record);

  // The row for `record` (with its '\n'); exposed for tests.
  [[nodiscard]] std::string format_row(const RequestRecord& record) const;
  // The header row (with its '\n').
  static std::string header();

 private:
  TraceWriter(std::FILE* file, std::string path, double run_start_unix_s, bool token_times);

  std::FILE* m_file = nullptr;
  std::string m_path;
  long m_committed_bytes = -1;  // file size after the last whole row; -1 = unknown
  double m_run_start_unix_s = 0;
  bool m_token_times = true;
};

// `text` as one CSV field: quoted (with doubled quotes) when it holds a comma, quote or newline.
std::string csv_field(std::string_view text);

}  // namespace kvprof::client
