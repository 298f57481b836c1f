// The request_trace.csv writer.
#include "kvprof/client/trace_writer.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace kvprof::client {

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"') out.push_back('"');
    out.push_back(c == '\n' || c == '\r' ? ' ' : c);
  }
  out.push_back('"');
  return out;
}

Expected<TraceWriter> TraceWriter::open(const std::filesystem::path& path, double run_start_unix_s,
                                        bool token_times) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return fail(ErrorKind::io,
                fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
  }
  TraceWriter writer(f, path.string(), run_start_unix_s, token_times);
  const std::string h = header();
  if (std::fwrite(h.data(), 1, h.size(), f) != h.size() || std::fflush(f) != 0) {
    return fail(ErrorKind::io,
                fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
  }
  return writer;
}

TraceWriter::TraceWriter(std::FILE* file, std::string path, double run_start_unix_s,
                         bool token_times)
    : m_file(file),
      m_path(std::move(path)),
      m_run_start_unix_s(run_start_unix_s),
      m_token_times(token_times) {}

TraceWriter::TraceWriter(TraceWriter&& other) noexcept
    : m_file(std::exchange(other.m_file, nullptr)),
      m_path(std::move(other.m_path)),
      m_run_start_unix_s(other.m_run_start_unix_s),
      m_token_times(other.m_token_times) {}

TraceWriter::~TraceWriter() {
  if (m_file != nullptr) std::fclose(m_file);
}

std::string TraceWriter::header() {
  return "request_id,condition_id,status,error_kind,http_status,input_len,max_tokens,"
         "prompt_tokens,completion_tokens,tokens_streamed,intended_send_unix_s,"
         "actual_send_unix_s,first_token_unix_s,end_unix_s,send_delay_ms,ttft_ms,e2e_ms,"
         "itl_mean_ms,finish_reason,token_times_ms,warning,error,repeat\n";
}

std::string TraceWriter::format_row(const RequestRecord& r) const {
  const auto unix_s = [&](int64_t t_ns) -> std::string {
    if (t_ns == k_no_time) return "";
    return fmt::format("{:.6f}", m_run_start_unix_s + static_cast<double>(t_ns) / 1e9);
  };
  const auto ms = [](double v) -> std::string { return v < 0 ? "" : fmt::format("{:.3f}", v); };
  std::string itl;
  if (r.chunks.size() > 1) {
    uint64_t n_tokens = 0;
    for (size_t i = 1; i < r.chunks.size(); ++i)
      n_tokens += r.chunks[i].n_tokens;
    const double span_ms = static_cast<double>(r.chunks.back().t_ns - r.chunks.front().t_ns) / 1e6;
    itl = fmt::format("{:.3f}", span_ms / static_cast<double>(std::max<uint64_t>(1, n_tokens)));
  }
  std::string token_times;
  if (m_token_times) {
    token_times.reserve(r.chunks.size() * 9);
    for (size_t i = 0; i < r.chunks.size(); ++i) {
      if (i > 0) token_times.push_back(';');
      const double t_ms = static_cast<double>(r.chunks[i].t_ns - r.intended_send_ns) / 1e6;
      fmt::format_to(std::back_inserter(token_times), "{:.3f}", t_ms);
      if (r.chunks[i].n_tokens != 1) {
        fmt::format_to(std::back_inserter(token_times), "x{}", r.chunks[i].n_tokens);
      }
    }
  }
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                     r.request_id, csv_field(r.condition_id), request_status_name(r.status),
                     failure_kind_name(r.failure), r.http_status, r.input_len, r.max_tokens,
                     r.usage ? std::to_string(r.usage->prompt_tokens) : std::string(),
                     r.usage ? std::to_string(r.usage->completion_tokens) : std::string(),
                     r.tokens_streamed, unix_s(r.intended_send_ns), unix_s(r.actual_send_ns),
                     unix_s(r.first_token_ns), unix_s(r.end_ns),
                     ms(static_cast<double>(r.actual_send_ns - r.intended_send_ns) / 1e6),
                     ms(r.ttft_ms()),
                     // A cancelled request did not complete: it has no end-to-end latency.
                     r.status == RequestStatus::cancelled ? std::string() : ms(r.e2e_ms()), itl,
                     csv_field(r.finish_reason), token_times, csv_field(r.warning),
                     csv_field(r.error_text), r.repeat);
}

Expected<void> TraceWriter::write(const RequestRecord& record) {
  const std::string row = format_row(record);
  if (m_committed_bytes < 0) m_committed_bytes = std::ftell(m_file);
  if (std::fwrite(row.data(), 1, row.size(), m_file) != row.size() || std::fflush(m_file) != 0) {
    const int err = errno;
    // Keep the file readable: cut a partly written row off.
    if (m_committed_bytes >= 0 && ::ftruncate(::fileno(m_file), m_committed_bytes) != 0) {
      // Nothing more can be done; the error below is what matters.
    }
    return fail(ErrorKind::io, fmt::format("cannot write '{}': {}", m_path, std::strerror(err)));
  }
  m_committed_bytes += static_cast<long>(row.size());
  return {};
}

}  // namespace kvprof::client
