// An incremental HTTP/1.1 response parser for the raw transport: bytes may arrive split
// anywhere; every length is bounded (status line and headers, chunk-size lines, trailers, sizes
// that would overflow); body bytes are handed on as views into the caller's buffer, never copied.
// Framing follows RFC 9112 section 6.3: no body for 1xx/204/304, Transfer-Encoding chunked
// (chunk extensions and trailers skipped), Content-Length, or a body delimited by the close.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvprof::client {

struct HttpParserLimits {
  size_t max_header_bytes = 64 * 1024;  // status line + header lines; trailers separately
  size_t max_header_count = 256;
  size_t max_chunk_line_bytes = 4096;  // one chunk-size line with its extensions
};

// Receives the events of one response, in order.
class HttpResponseHandler {
 public:
  virtual ~HttpResponseHandler() = default;
  // The final (non-1xx) status, once all of its headers have arrived.
  virtual void on_response_status(int http_status) = 0;
  // A piece of the decoded body; return false to stop parsing (feed() then says stopped).
  virtual bool on_response_body(std::string_view bytes) = 0;
};

enum class HttpParseState {
  need_more,  // the response is not complete yet
  complete,   // the response ended; bytes after it were not consumed
  stopped,    // the handler's on_response_body returned false
  error,      // the response is malformed or too large; error() says why
};

// What went wrong, for mapping to transport outcomes.
enum class HttpParseError {
  none,
  bad_status_line,
  headers_too_large,
  bad_header,
  bad_content_length,
  bad_chunk,            // a malformed or oversized chunk-size line, or bytes where CRLF belongs
  eof_before_response,  // the connection closed before any byte of the response
  eof_in_headers,
  eof_in_body,  // Content-Length or chunked body cut short
};

class HttpResponseParser {
 public:
  explicit HttpResponseParser(HttpParserLimits limits = {}) : m_limits(limits) {}

  // Forgets the previous response, for the next one on the same connection.
  void reset();

  // Consumes `bytes`, reporting to `handler`; `consumed_bytes` is how many were used (all of
  // them unless the response completed or stopped inside them). After error, stopped or
  // complete, further calls return the same state and consume nothing.
  HttpParseState feed(std::string_view bytes, HttpResponseHandler& handler, size_t& consumed_bytes);

  // The peer closed the connection: completes a close-delimited body; otherwise an error
  // (eof_before_response, eof_in_headers or eof_in_body).
  HttpParseState finish_at_eof();

  [[nodiscard]] HttpParseState state() const { return m_state; }
  [[nodiscard]] HttpParseError error_kind() const { return m_error_kind; }
  // A one-line reason once state() is error; empty otherwise.
  [[nodiscard]] const std::string& error() const { return m_error; }
  // True when some byte of a response has arrived.
  [[nodiscard]] bool started() const { return m_bytes_seen > 0; }
  // The final status; 0 before the headers are complete.
  [[nodiscard]] int status() const { return m_status; }
  // After complete: the connection may carry another request (HTTP/1.1 or keep-alive, no
  // "Connection: close", the body was not delimited by the close).
  [[nodiscard]] bool keep_alive() const { return m_keep_alive; }
  // Decoded body bytes handed on so far.
  [[nodiscard]] uint64_t body_bytes() const { return m_body_bytes; }

 private:
  enum class Phase {
    head,           // status line and headers
    length_body,    // Content-Length
    close_body,     // until the connection closes
    chunk_size,     // hex digits of a chunk-size line
    chunk_ext,      // the rest of a chunk-size line (extensions, whitespace)
    chunk_size_lf,  // after '\r' of a chunk-size line
    chunk_data,
    chunk_data_cr,  // the CRLF after chunk data
    chunk_data_lf,
    trailers,
    done,
  };

  HttpParseState fail(HttpParseError kind, std::string message);
  // Consumes head bytes from `bytes` at `pos`; true when the head (or trailers) ended.
  bool take_line_block(std::string_view bytes, size_t& pos, size_t max_bytes);
  // Parses the collected head and chooses the body framing; calls on_response_status.
  HttpParseState parse_head(HttpResponseHandler& handler);
  // Enters the data of a chunk of `size_bytes`, or the trailers after the last (size 0) chunk.
  void start_chunk(uint64_t size_bytes);
  HttpParseState parse_chunk_byte(char c);
  // Takes a whole "<hex>\r\n" chunk-size line at `pos`; false (nothing taken) otherwise.
  bool take_whole_size_line(std::string_view bytes, size_t& pos);
  bool deliver(HttpResponseHandler& handler, std::string_view bytes);

  HttpParserLimits m_limits;
  Phase m_phase = Phase::head;
  HttpParseState m_state = HttpParseState::need_more;
  HttpParseError m_error_kind = HttpParseError::none;
  std::string m_error;
  std::string m_block;        // the head (or trailers) collected so far
  size_t m_line_bytes = 0;    // bytes of the current line in m_block before its '\n'
  bool m_line_cr = false;     // the current line so far is just "\r"
  uint64_t m_remaining = 0;   // of a Content-Length body or of the current chunk
  uint64_t m_chunk_size = 0;  // being parsed
  size_t m_chunk_line_bytes = 0;
  size_t m_chunk_digits = 0;
  uint64_t m_bytes_seen = 0;
  uint64_t m_body_bytes = 0;
  int m_status = 0;
  bool m_keep_alive = false;
};

}  // namespace kvprof::client
