// Per-request measurement: the ResponseSink state machine and the record's derived latencies.
#include "kvprof/client/request_record.hpp"

#include <fmt/format.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "kvprof/util/utf8.hpp"

namespace kvprof::client {

namespace {

constexpr size_t k_max_error_body_bytes = 4096;

// Halves the time resolution of `chunks` past the first: each pair becomes one chunk at the
// later time holding both counts, so the span and token count are kept exactly.
void merge_chunk_pairs(std::vector<TokenChunk>& chunks) {
  size_t out = 1;
  for (size_t i = 1; i < chunks.size(); i += 2, ++out) {
    chunks[out] = chunks[i];
    if (i + 1 < chunks.size()) {
      chunks[out].t_ns = chunks[i + 1].t_ns;
      chunks[out].n_tokens += chunks[i + 1].n_tokens;
    }
  }
  chunks.resize(std::min(out, chunks.size()));
}

// The message of an OpenAI-style error body, or the body itself.
std::string error_body_message(std::string_view body) {
  auto doc = nlohmann::json::parse(body, nullptr, false);
  if (!doc.is_discarded() && doc.is_object()) {
    auto err = doc.find("error");
    if (err != doc.end() && err->is_object()) {
      auto msg = err->find("message");
      if (msg != err->end() && msg->is_string()) return one_line(msg->get<std::string>());
    }
    auto msg = doc.find("message");
    if (msg != doc.end() && msg->is_string()) return one_line(msg->get<std::string>());
  }
  return one_line(body);
}

}  // namespace

std::string_view request_status_name(RequestStatus status) {
  switch (status) {
    case RequestStatus::ok:
      return "ok";
    case RequestStatus::error:
      return "error";
    case RequestStatus::cancelled:
      return "cancelled";
  }
  return "error";
}

std::string_view failure_kind_name(FailureKind kind) {
  switch (kind) {
    case FailureKind::none:
      return "";
    case FailureKind::connect:
      return "connect";
    case FailureKind::reset:
      return "reset";
    case FailureKind::timeout:
      return "timeout";
    case FailureKind::http_4xx:
      return "http_4xx";
    case FailureKind::http_429:
      return "http_429";
    case FailureKind::http_5xx:
      return "http_5xx";
    case FailureKind::malformed_sse:
      return "malformed_sse";
    case FailureKind::server_error:
      return "server_error";
    case FailureKind::cancelled:
      return "cancelled";
    case FailureKind::other:
      return "other";
  }
  return "other";
}

double RequestRecord::ttft_ms() const {
  if (first_token_ns == k_no_time) return -1.0;
  return static_cast<double>(first_token_ns - intended_send_ns) / 1e6;
}

double RequestRecord::e2e_ms() const {
  if (end_ns == k_no_time) return -1.0;
  return static_cast<double>(end_ns - intended_send_ns) / 1e6;
}

uint64_t RequestRecord::completion_tokens() const {
  return usage && usage_trusted ? usage->completion_tokens : tokens_streamed;
}

ResponseSink::ResponseSink(RequestRecord record, RunClock clock, bool record_token_times,
                           std::function<void(ResponseSink&)> on_finished)
    : m_record(std::move(record)),
      m_clock(std::move(clock)),
      m_record_token_times(record_token_times),
      m_on_finished(std::move(on_finished)) {}

void ResponseSink::on_status(int http_status) {
  m_record.http_status = http_status;
}

void ResponseSink::fail_with(FailureKind kind, std::string text) {
  if (m_record.failure != FailureKind::none) return;  // the first cause wins
  m_record.failure = kind;
  m_record.error_text = std::move(text);
}

bool ResponseSink::on_data(std::string_view bytes, int64_t arrival_ns) {
  // Reads arrive in order; a clock step between two of them must not reorder tokens.
  m_last_arrival_ns = std::max(m_last_arrival_ns, m_clock.at(arrival_ns));
  if (m_record.http_status != 0 && (m_record.http_status < 200 || m_record.http_status >= 300)) {
    const size_t room =
        k_max_error_body_bytes - std::min(k_max_error_body_bytes, m_error_body.size());
    m_error_body.append(bytes.substr(0, room));
    return true;
  }
  const int64_t now = m_last_arrival_ns;
  bool failed = false;
  bool after_done = false;
  const bool parsed = m_parser.feed(bytes, [&](const SseEventView& event) {
    if (m_saw_done) {
      after_done = true;  // nothing after data: [DONE] counts
      return false;
    }
    auto chunk = parse_stream_event(event, m_record.tokens_streamed);
    if (!chunk) {
      fail_with(FailureKind::malformed_sse, chunk.error().message);
      failed = true;
      return false;
    }
    switch (chunk->kind) {
      case StreamChunk::Kind::done:
        m_saw_done = true;
        break;
      case StreamChunk::Kind::error:
        fail_with(FailureKind::server_error, chunk->error_message);
        failed = true;
        return false;
      case StreamChunk::Kind::data:
        if (chunk->n_tokens > 0) {
          if (m_record.first_token_ns == k_no_time) m_record.first_token_ns = now;
          m_record.tokens_streamed += chunk->n_tokens;
          if (m_record.max_tokens > 0 && m_record.tokens_streamed > m_record.max_tokens) {
            fail_with(FailureKind::malformed_sse,
                      fmt::format("the server streamed more tokens than max_tokens ({}); the "
                                  "request was cut off there",
                                  m_record.max_tokens));
            failed = true;
            return false;
          }
          if (m_record_token_times) {
            if (m_record.chunks.size() >= k_max_token_chunks) merge_chunk_pairs(m_record.chunks);
            m_record.chunks.push_back({now, chunk->n_tokens});
          }
        }
        if (chunk->usage) m_record.usage = chunk->usage;
        if (!chunk->finish_reason.empty()) m_record.finish_reason = chunk->finish_reason;
        break;
    }
    return true;
  });
  if (failed || after_done) return false;  // after [DONE]: complete, stop reading
  if (!parsed) {
    fail_with(FailureKind::malformed_sse, m_parser.error());
    return false;
  }
  return true;
}

void ResponseSink::on_done(const TransportResult& result) {
  // Ended by its last bytes (when the transport knows when they came), else now.
  m_record.end_ns = result.arrival_ns != 0
                        ? std::max(m_last_arrival_ns, m_clock.at(result.arrival_ns))
                        : std::max(m_last_arrival_ns, m_clock.now());
  const int status = m_record.http_status;
  switch (result.outcome) {
    case TransportOutcome::ok:
    case TransportOutcome::aborted:
      break;
    case TransportOutcome::connect:
      fail_with(FailureKind::connect, result.message);
      break;
    case TransportOutcome::reset:
      fail_with(FailureKind::reset, result.message);
      break;
    case TransportOutcome::timeout:
      fail_with(FailureKind::timeout, result.message);
      break;
    case TransportOutcome::cancelled:
      fail_with(FailureKind::cancelled, "the run was stopped");
      break;
    case TransportOutcome::other:
      fail_with(FailureKind::other, result.message);
      break;
  }
  if (status != 0 && (status < 200 || status >= 300)) {
    const FailureKind kind = status == 429   ? FailureKind::http_429
                             : status >= 500 ? FailureKind::http_5xx
                             : status >= 400 ? FailureKind::http_4xx
                                             : FailureKind::other;
    std::string text = fmt::format("HTTP {}", status);
    if (status >= 300 && status < 400) {
      text += " (a redirect: kvprof does not follow redirects; give the URL it points to)";
    }
    if (!m_error_body.empty()) text += ": " + error_body_message(m_error_body);
    // An HTTP error status explains a transport failure better than the failure itself.
    if (m_record.failure != FailureKind::cancelled) {
      m_record.failure = FailureKind::none;
      fail_with(kind, std::move(text));
    }
  }
  if (result.outcome == TransportOutcome::ok && m_record.failure == FailureKind::none) {
    if (status == 0) {
      fail_with(FailureKind::other, "no HTTP response");
    } else if (!m_saw_done) {
      fail_with(FailureKind::malformed_sse, m_parser.has_partial_event()
                                                ? "the stream ended inside an event"
                                                : "the stream ended before data: [DONE]");
    }
  }
  if (m_record.failure == FailureKind::none) {
    m_record.status = RequestStatus::ok;
    if (m_record.usage && m_record.max_tokens > 0 &&
        m_record.usage->completion_tokens > m_record.max_tokens) {
      // A server that claims more than it may send is not believed: kvprof's count stands.
      m_record.usage_trusted = false;
      m_record.warning = fmt::format(
          "the server's usage says {} completion tokens, more than max_tokens {}; kvprof "
          "counted {} and uses that",
          m_record.usage->completion_tokens, m_record.max_tokens, m_record.tokens_streamed);
    } else if (m_record.usage && m_record.usage->completion_tokens != m_record.max_tokens) {
      m_record.warning = fmt::format("completion_tokens {} != max_tokens {}",
                                     m_record.usage->completion_tokens, m_record.max_tokens);
    } else if (m_record.usage && m_record.input_len_exact && m_record.usage->prompt_tokens != 0 &&
               m_record.usage->prompt_tokens != m_record.input_len) {
      m_record.warning = fmt::format("prompt_tokens {} != input_len {}",
                                     m_record.usage->prompt_tokens, m_record.input_len);
    }
  } else {
    m_record.status = m_record.failure == FailureKind::cancelled ? RequestStatus::cancelled
                                                                 : RequestStatus::error;
  }
  m_finished = true;
  if (m_on_finished) m_on_finished(*this);
}

}  // namespace kvprof::client
