// What kvprof measured for one request, and the StreamSink that measures it: status, failure
// kind, and times on the monotonic clock from the intended send to the last token.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/client/openai.hpp"
#include "kvprof/client/sse_parser.hpp"
#include "kvprof/client/transport.hpp"

namespace kvprof::client {

enum class RequestStatus { ok, error, cancelled };

// Why a request failed; none for ok.
enum class FailureKind {
  none,
  connect,   // the server could not be reached
  reset,     // the connection broke mid-request
  timeout,   // --request-timeout passed
  http_4xx,  // a 4xx status other than 429
  http_429,  // the server refused for load
  http_5xx,
  malformed_sse,  // the stream broke the protocol: not SSE / OpenAI JSON, more tokens than
                  // max_tokens, or it ended before [DONE]
  server_error,   // the stream carried {"error": ...}
  cancelled,      // the run was stopped
  other,          // anything else, e.g. a redirect (3xx) kvprof does not follow
};

std::string_view request_status_name(RequestStatus status);
std::string_view failure_kind_name(FailureKind kind);

// One streamed chunk that carried tokens: when it arrived and how many tokens it held.
struct TokenChunk {
  int64_t t_ns = 0;  // monotonic ns since the run started
  uint32_t n_tokens = 1;
};

inline constexpr int64_t k_no_time = -1;

// Token chunks kept per request: past it, the chunks after the first are merged in pairs (each
// keeps the later time and both counts), so a long generation's times stay bounded in memory and
// in its request_trace.csv row (well under the 1 MiB a row may have).
inline constexpr size_t k_max_token_chunks = 16384;

struct RequestRecord {
  uint64_t request_id = 0;
  uint32_t repeat =
      0;  // 0: the workload's request; n: its n-th repeat (RunOptions::min_condition_s)
  std::string condition_id;
  uint32_t input_len = 0;       // what was asked
  uint32_t max_tokens = 0;      // what was asked
  bool input_len_exact = true;  // token-ID prompts: usage.prompt_tokens should equal input_len
  // Monotonic ns since the run started; k_no_time when it did not happen.
  int64_t intended_send_ns = 0;  // from the schedule (closed loop: when the slot freed)
  int64_t actual_send_ns = 0;
  int64_t first_token_ns = k_no_time;
  int64_t end_ns = k_no_time;
  std::vector<TokenChunk> chunks;  // only when token times are recorded; k_max_token_chunks
  uint64_t tokens_streamed = 0;    // tokens counted from the chunks
  std::optional<Usage> usage;      // from the server's final usage chunk
  bool usage_trusted = true;       // false when usage claims more tokens than max_tokens
  int http_status = 0;             // 0 when no response arrived
  RequestStatus status = RequestStatus::ok;
  FailureKind failure = FailureKind::none;
  std::string error_text;  // one line; empty for ok
  std::string finish_reason;
  std::string warning;  // e.g. completion_tokens differ from max_tokens

  // Time to first token from the intended send, ms; negative when no token arrived.
  [[nodiscard]] double ttft_ms() const;
  // End-to-end latency from the intended send, ms; negative when the request never ended.
  [[nodiscard]] double e2e_ms() const;
  // Completion tokens: usage when the server sent it and it is believable, else the streamed
  // count.
  [[nodiscard]] uint64_t completion_tokens() const;
};

// A run's clock: ns since the run started, read from a monotonic source (monotonic_now_ns, or
// a test's fake) whose reading at the start is `origin_ns`.
struct RunClock {
  int64_t origin_ns = 0;
  std::function<int64_t()> source = monotonic_now_ns;

  [[nodiscard]] int64_t now() const { return source() - origin_ns; }
  // The run time of a reading `source_ns` of the same source.
  [[nodiscard]] int64_t at(int64_t source_ns) const { return source_ns - origin_ns; }
};

// Measures one request: feeds the body through the SSE parser and the OpenAI chunk parser,
// times token chunks by when their bytes arrived (on `clock`), and classifies how it ended.
// `on_finished` is called from on_done, after the record is final.
class ResponseSink final : public StreamSink {
 public:
  ResponseSink(RequestRecord record, RunClock clock, bool record_token_times,
               std::function<void(ResponseSink&)> on_finished);

  void on_status(int http_status) override;
  bool on_data(std::string_view bytes, int64_t arrival_ns) override;
  void on_done(const TransportResult& result) override;

  [[nodiscard]] RequestRecord& record() { return m_record; }
  [[nodiscard]] bool finished() const { return m_finished; }

 private:
  void fail_with(FailureKind kind, std::string text);

  RequestRecord m_record;
  RunClock m_clock;
  int64_t m_last_arrival_ns = k_no_time;  // run time of the newest data, never decreasing
  bool m_record_token_times;
  std::function<void(ResponseSink&)> m_on_finished;
  SseParser m_parser;
  std::string m_error_body;  // the body of a non-2xx response, bounded
  bool m_saw_done = false;
  bool m_finished = false;
};

}  // namespace kvprof::client
