// The incremental HTTP/1.1 response parser (see http_response_parser.hpp): a byte loop for the
// head, chunk-size lines and trailers, and whole-slice hand-off for body bytes.
#include "kvprof/client/http_response_parser.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "kvprof/util/strings.hpp"

namespace kvprof::client {

namespace {

constexpr size_t k_max_chunk_size_digits = 15;  // 2^60 bytes: larger is hostile, not a stream
constexpr size_t k_kept_block_capacity = 4096;  // a larger head buffer is freed between responses

bool is_token_char(char c) {
  if (c >= 'a' && c <= 'z') return true;
  if (c >= 'A' && c <= 'Z') return true;
  if (c >= '0' && c <= '9') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// Calls `f(token)` for each comma-separated, trimmed, non-empty element of `value`.
template <class F>
void for_each_list_item(std::string_view value, F&& f) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view item = trim_ows(value.substr(0, comma));
    if (!item.empty()) f(item);
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
}

// A Content-Length value: decimal digits that fit in uint64_t.
bool parse_length(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  uint64_t v = 0;
  for (const char c : s) {
    if (!is_digit(c)) return false;
    const auto d = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return false;
    v = v * 10 + d;
  }
  out = v;
  return true;
}

std::string printable(std::string_view s, size_t max_chars = 80) {
  std::string out;
  for (const char c : s.substr(0, max_chars)) {
    const auto u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u >= 0x7f ? '?' : c);
  }
  if (s.size() > max_chars) out += "...";
  return out;
}

}  // namespace

void HttpResponseParser::reset() {
  const HttpParserLimits limits = m_limits;
  std::string block = std::move(m_block);
  block.clear();
  if (block.capacity() > k_kept_block_capacity) block = std::string();
  *this = HttpResponseParser(limits);
  m_block = std::move(block);
}

HttpParseState HttpResponseParser::fail(HttpParseError kind, std::string message) {
  m_state = HttpParseState::error;
  m_error_kind = kind;
  m_error = std::move(message);
  m_keep_alive = false;
  return m_state;
}

bool HttpResponseParser::take_line_block(std::string_view bytes, size_t& pos, size_t max_bytes) {
  while (pos < bytes.size()) {
    const char c = bytes[pos++];
    if (m_block.size() >= max_bytes) {
      fail(HttpParseError::headers_too_large,
           fmt::format("the response {} are larger than {} bytes",
                       m_phase == Phase::head ? "headers" : "trailers", max_bytes));
      return false;
    }
    m_block.push_back(c);
    if (c == '\n') {
      const bool blank = m_line_bytes == 0 || (m_line_bytes == 1 && m_line_cr);
      m_line_bytes = 0;
      m_line_cr = false;
      if (blank) return true;
    } else {
      m_line_cr = m_line_bytes == 0 && c == '\r';
      ++m_line_bytes;
    }
  }
  return false;
}

HttpParseState HttpResponseParser::parse_head(HttpResponseHandler& handler) {
  std::string_view block = m_block;
  size_t n_lines = 0;
  int status = 0;
  int minor_version = 0;
  bool has_length = false, has_te = false, te_chunked = false;
  bool conn_close = false, conn_keep_alive = false;
  uint64_t length = 0;
  while (!block.empty()) {
    const size_t nl = block.find('\n');
    std::string_view line = block.substr(0, nl);
    block.remove_prefix(nl == std::string_view::npos ? block.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\r') != std::string_view::npos) {
      return fail(HttpParseError::bad_header, "a bare CR in the response head");
    }
    if (n_lines++ == 0) {
      // "HTTP/1.x SSS[ reason]"
      if (line.size() < 12 || !line.starts_with("HTTP/1.") || !is_digit(line[7]) ||
          line[8] != ' ' || !is_digit(line[9]) || !is_digit(line[10]) || !is_digit(line[11]) ||
          (line.size() > 12 && line[12] != ' ')) {
        return fail(HttpParseError::bad_status_line,
                    fmt::format("not an HTTP/1.x status line: '{}'", printable(line)));
      }
      minor_version = line[7] - '0';
      status = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
      if (status < 100 || status > 599) {
        return fail(HttpParseError::bad_status_line, fmt::format("HTTP status {}", status));
      }
      continue;
    }
    if (line.empty()) break;  // the blank line that ends the head
    if (n_lines - 1 > m_limits.max_header_count) {
      return fail(HttpParseError::headers_too_large,
                  fmt::format("more than {} response headers", m_limits.max_header_count));
    }
    if (line.front() == ' ' || line.front() == '\t') {
      return fail(HttpParseError::bad_header, "a folded response header line");
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return fail(HttpParseError::bad_header,
                  fmt::format("a response header without a name: '{}'", printable(line)));
    }
    const std::string_view name = line.substr(0, colon);
    if (!std::ranges::all_of(name, is_token_char)) {
      return fail(HttpParseError::bad_header,
                  fmt::format("a bad response header name: '{}'", printable(name)));
    }
    const std::string_view value = trim_ows(line.substr(colon + 1));
    for (const char c : value) {
      const auto u = static_cast<unsigned char>(c);
      if ((u < 0x20 && c != '\t') || u == 0x7f) {
        return fail(HttpParseError::bad_header,
                    fmt::format("a control character in response header '{}'", printable(name)));
      }
    }
    if (iequals(name, "content-length")) {
      bool ok = true;
      for_each_list_item(value, [&](std::string_view item) {
        uint64_t v = 0;
        if (!parse_length(item, v) || (has_length && v != length)) ok = false;
        length = v;
        has_length = true;
      });
      if (!ok || !has_length) {
        return fail(HttpParseError::bad_content_length,
                    fmt::format("a bad Content-Length: '{}'", printable(value)));
      }
    } else if (iequals(name, "transfer-encoding")) {
      has_te = true;
      te_chunked = false;  // only a final "chunked" frames the body
      for_each_list_item(value,
                         [&](std::string_view item) { te_chunked = iequals(item, "chunked"); });
    } else if (iequals(name, "connection")) {
      for_each_list_item(value, [&](std::string_view item) {
        if (iequals(item, "close")) conn_close = true;
        if (iequals(item, "keep-alive")) conn_keep_alive = true;
      });
    }
  }
  m_block.clear();
  if (status < 200) {
    if (status == 101) return fail(HttpParseError::bad_status_line, "an unasked-for 101 upgrade");
    return m_state;  // an interim response (100 Continue, 103 Early Hints): the next head follows
  }
  m_status = status;
  m_keep_alive = !conn_close && (minor_version >= 1 || conn_keep_alive);
  handler.on_response_status(status);
  if (status == 204 || status == 304) {
    m_phase = Phase::done;
    m_state = HttpParseState::complete;
  } else if (has_te) {
    if (has_length) m_keep_alive = false;  // conflicting framing: never reuse the connection
    if (te_chunked) {
      m_phase = Phase::chunk_size;
    } else {
      m_phase = Phase::close_body;
      m_keep_alive = false;
    }
  } else if (has_length) {
    m_remaining = length;
    m_phase = length == 0 ? Phase::done : Phase::length_body;
    if (length == 0) m_state = HttpParseState::complete;
  } else {
    m_phase = Phase::close_body;
    m_keep_alive = false;
  }
  return m_state;
}

void HttpResponseParser::start_chunk(uint64_t size_bytes) {
  if (size_bytes == 0) {  // the last chunk: trailers follow
    m_phase = Phase::trailers;
    m_block.clear();
    m_line_bytes = 0;
    m_line_cr = false;
  } else {
    m_remaining = size_bytes;
    m_phase = Phase::chunk_data;
  }
}

HttpParseState HttpResponseParser::parse_chunk_byte(char c) {
  const auto end_size_line = [this] {
    start_chunk(m_chunk_size);
    m_chunk_size = 0;
    m_chunk_digits = 0;
    m_chunk_line_bytes = 0;
  };
  if (m_phase == Phase::chunk_size || m_phase == Phase::chunk_ext) {
    if (++m_chunk_line_bytes > m_limits.max_chunk_line_bytes) {
      return fail(HttpParseError::bad_chunk, fmt::format("a chunk-size line longer than {} bytes",
                                                         m_limits.max_chunk_line_bytes));
    }
  }
  switch (m_phase) {
    case Phase::chunk_size: {
      if (const int h = hex_value(c); h >= 0) {
        if (++m_chunk_digits > k_max_chunk_size_digits) {
          return fail(HttpParseError::bad_chunk, "a chunk size too large");
        }
        m_chunk_size = m_chunk_size * 16 + static_cast<uint64_t>(h);
        return m_state;
      }
      if (m_chunk_digits == 0) {
        return fail(HttpParseError::bad_chunk, fmt::format("a chunk size that is not hex ('{}')",
                                                           printable(std::string_view(&c, 1))));
      }
      if (c == ';' || c == ' ' || c == '\t') {
        m_phase = Phase::chunk_ext;
      } else if (c == '\r') {
        m_phase = Phase::chunk_size_lf;
      } else if (c == '\n') {
        end_size_line();
      } else {
        return fail(HttpParseError::bad_chunk, "a bad character after a chunk size");
      }
      return m_state;
    }
    case Phase::chunk_ext: {
      const auto u = static_cast<unsigned char>(c);
      if (c == '\r') {
        m_phase = Phase::chunk_size_lf;
      } else if (c == '\n') {
        end_size_line();
      } else if ((u < 0x20 && c != '\t') || u == 0x7f) {
        return fail(HttpParseError::bad_chunk, "a control character in a chunk extension");
      }
      return m_state;
    }
    case Phase::chunk_size_lf:
      if (c != '\n') return fail(HttpParseError::bad_chunk, "a CR without LF in a chunk-size line");
      end_size_line();
      return m_state;
    case Phase::chunk_data_cr:
      if (c == '\r') {
        m_phase = Phase::chunk_data_lf;
      } else if (c == '\n') {
        m_phase = Phase::chunk_size;
      } else {
        return fail(HttpParseError::bad_chunk, "chunk data longer than its chunk size");
      }
      return m_state;
    case Phase::chunk_data_lf:
      if (c != '\n') return fail(HttpParseError::bad_chunk, "a CR without LF after chunk data");
      m_phase = Phase::chunk_size;
      return m_state;
    default:
      return m_state;
  }
}

bool HttpResponseParser::take_whole_size_line(std::string_view bytes, size_t& pos) {
  // The common case: "<hex>\r\n" whole in `bytes`; anything else goes byte by byte.
  size_t i = pos;
  uint64_t size = 0;
  while (i < bytes.size() && i - pos < k_max_chunk_size_digits) {
    const int h = hex_value(bytes[i]);
    if (h < 0) break;
    size = size * 16 + static_cast<uint64_t>(h);
    ++i;
  }
  if (i == pos || bytes.size() - i < 2 || bytes[i] != '\r' || bytes[i + 1] != '\n') return false;
  // A line over the limit goes the byte-by-byte way, which refuses it wherever the input is cut.
  if (i + 2 - pos > m_limits.max_chunk_line_bytes) return false;
  pos = i + 2;
  start_chunk(size);
  return true;
}

bool HttpResponseParser::deliver(HttpResponseHandler& handler, std::string_view bytes) {
  if (bytes.empty()) return true;
  m_body_bytes += bytes.size();
  if (handler.on_response_body(bytes)) return true;
  m_state = HttpParseState::stopped;
  m_keep_alive = false;
  return false;
}

HttpParseState HttpResponseParser::feed(std::string_view bytes, HttpResponseHandler& handler,
                                        size_t& consumed_bytes) {
  consumed_bytes = 0;
  size_t pos = 0;
  while (pos < bytes.size() && m_state == HttpParseState::need_more) {
    switch (m_phase) {
      case Phase::head:
        if (take_line_block(bytes, pos, m_limits.max_header_bytes)) parse_head(handler);
        break;
      case Phase::length_body:
      case Phase::chunk_data: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(m_remaining, bytes.size() - pos));
        const std::string_view piece = bytes.substr(pos, n);
        pos += n;
        m_remaining -= n;
        if (m_remaining == 0) {
          if (m_phase == Phase::chunk_data) {
            m_phase = Phase::chunk_data_cr;
          } else {
            m_phase = Phase::done;
            m_state = HttpParseState::complete;
          }
        }
        deliver(handler, piece);
        break;
      }
      case Phase::close_body: {
        const std::string_view piece = bytes.substr(pos);
        pos = bytes.size();
        deliver(handler, piece);
        break;
      }
      case Phase::trailers:
        if (take_line_block(bytes, pos, m_limits.max_header_bytes)) {
          m_phase = Phase::done;
          m_state = HttpParseState::complete;
        }
        break;
      case Phase::done:
        break;
      case Phase::chunk_size:
        if (m_chunk_line_bytes == 0 && take_whole_size_line(bytes, pos)) break;
        parse_chunk_byte(bytes[pos++]);
        break;
      case Phase::chunk_data_cr:
        if (bytes.size() - pos >= 2 && bytes[pos] == '\r' && bytes[pos + 1] == '\n') {
          pos += 2;
          m_phase = Phase::chunk_size;
          break;
        }
        parse_chunk_byte(bytes[pos++]);
        break;
      default:
        parse_chunk_byte(bytes[pos++]);
        break;
    }
  }
  consumed_bytes = pos;
  m_bytes_seen += pos;
  return m_state;
}

HttpParseState HttpResponseParser::finish_at_eof() {
  if (m_state != HttpParseState::need_more) return m_state;
  switch (m_phase) {
    case Phase::close_body:
      m_phase = Phase::done;
      m_keep_alive = false;
      m_state = HttpParseState::complete;
      return m_state;
    case Phase::head:
      if (m_bytes_seen == 0) {
        return fail(HttpParseError::eof_before_response,
                    "the server closed the connection without a response");
      }
      return fail(HttpParseError::eof_in_headers,
                  "the server closed the connection inside the response headers");
    case Phase::length_body:
      return fail(HttpParseError::eof_in_body,
                  fmt::format("the server closed the connection with {} body bytes outstanding",
                              m_remaining));
    default:
      return fail(HttpParseError::eof_in_body,
                  "the server closed the connection inside a chunked body");
  }
}

}  // namespace kvprof::client
