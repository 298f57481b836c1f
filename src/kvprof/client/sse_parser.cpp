// Incremental SSE parsing: a byte-at-a-time state machine over lines, with a fast path that
// handles whole lines straight from the input buffer.
#include "kvprof/client/sse_parser.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace kvprof::client {

namespace {

constexpr std::string_view k_bom = "\xEF\xBB\xBF";

// Index of the first '\r' or '\n' in `s` at or after `from`, or npos. Two memchr scans (the
// second only up to the first '\n') beat a byte loop on the ~200-byte lines of a token stream.
size_t find_eol(std::string_view s, size_t from) {
  if (from >= s.size()) return std::string_view::npos;
  const char* begin = s.data() + from;
  const size_t n = s.size() - from;
  const auto* nl = static_cast<const char*>(std::memchr(begin, '\n', n));
  const size_t cr_scan = nl != nullptr ? static_cast<size_t>(nl - begin) : n;
  if (const auto* cr = static_cast<const char*>(std::memchr(begin, '\r', cr_scan)); cr != nullptr) {
    return from + static_cast<size_t>(cr - begin);
  }
  return nl != nullptr ? from + static_cast<size_t>(nl - begin) : std::string_view::npos;
}

}  // namespace

bool SseParser::feed(std::string_view bytes, std::vector<SseEvent>& out) {
  return feed(bytes, [&out](const SseEventView& event) {
    out.push_back({std::string(event.type), std::string(event.data), std::string(event.id)});
    return true;
  });
}

bool SseParser::feed_to(std::string_view bytes, Handler handler) {
  if (failed()) return false;
  if (m_stopped) return true;
  m_bytes_seen += bytes.size();
  size_t pos = 0;
  while (pos < bytes.size() && !m_stopped) {
    if (m_after_cr) {
      m_after_cr = false;
      if (bytes[pos] == '\n') {
        ++pos;
        continue;
      }
    }
    const size_t eol = find_eol(bytes, pos);
    if (eol == std::string_view::npos) {
      const size_t rest = bytes.size() - pos;
      if (m_line.size() + rest > m_max_event_bytes) {
        m_error = fmt::format("an SSE line is longer than {} bytes", m_max_event_bytes);
        return false;
      }
      m_line.append(bytes.substr(pos));
      return true;
    }
    if (m_line.empty()) {
      if (eol - pos > m_max_event_bytes) {
        m_error = fmt::format("an SSE line is longer than {} bytes", m_max_event_bytes);
        return false;
      }
      process_line(bytes.substr(pos, eol - pos), handler);
    } else {
      if (m_line.size() + (eol - pos) > m_max_event_bytes) {
        m_error = fmt::format("an SSE line is longer than {} bytes", m_max_event_bytes);
        return false;
      }
      m_line.append(bytes.substr(pos, eol - pos));
      process_line(m_line, handler);
      m_line.clear();
    }
    if (failed()) return false;
    m_after_cr = bytes[eol] == '\r';
    pos = eol + 1;
  }
  return true;
}

void SseParser::process_line(std::string_view line, Handler handler) {
  if (m_first_line) {
    m_first_line = false;
    if (line.starts_with(k_bom)) line.remove_prefix(k_bom.size());
  }
  if (line.empty()) {  // a blank line dispatches the event
    if (m_has_data) {
      SseEventView event;
      if (!m_event_type.empty()) event.type = m_event_type;
      event.data = std::string_view(m_data).substr(0, m_data.size() - 1);  // less the last '\n'
      event.id = m_last_id;
      if (!handler.call(handler.fn, event)) m_stopped = true;
    }
    m_data.clear();  // keeps its capacity, so the next event's data is not allocated again
    m_event_type.clear();
    m_has_data = false;
    return;
  }
  if (line.front() == ':') return;  // a comment
  std::string_view field = line;
  std::string_view value;
  if (const size_t colon = line.find(':'); colon != std::string_view::npos) {
    field = line.substr(0, colon);
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (m_data.size() + value.size() + 1 > m_max_event_bytes) {
      m_error = fmt::format("an SSE event's data is larger than {} bytes", m_max_event_bytes);
      return;
    }
    m_data.append(value);
    m_data.push_back('\n');
    m_has_data = true;
  } else if (field == "event") {
    m_event_type.assign(value);
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) m_last_id.assign(value);
  }
  // "retry" and unknown fields are ignored, as the spec says.
}

bool SseParser::has_partial_event() const {
  return m_has_data || !m_line.empty();
}

}  // namespace kvprof::client
