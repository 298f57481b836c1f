// Incremental Server-Sent Events parser (the WHATWG event-stream format): bytes may arrive split
// anywhere, lines end in \n, \r\n or \r, multi-line data is joined with \n, comments are ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvprof::client {

struct SseEvent {
  std::string type = "message";  // the "event:" field, "message" when absent
  std::string data;              // the "data:" lines joined with '\n'
  std::string id;                // the last "id:" field seen, empty when none
};

class SseParser {
 public:
  static constexpr size_t k_default_max_event_bytes = 4 * 1024 * 1024;

  explicit SseParser(size_t max_event_bytes = k_default_max_event_bytes)
      : m_max_event_bytes(max_event_bytes) {}

  // Consumes `bytes` and appends every event completed by them to `out`. Returns false (and
  // ignores all later input) once a line or an event's data exceeds the size bound; error()
  // then says why.
  bool feed(std::string_view bytes, std::vector<SseEvent>& out);

  // True when bytes of an event that was never ended by a blank line are buffered (a stream cut
  // short); the spec discards such an event.
  [[nodiscard]] bool has_partial_event() const;

  // Empty while the stream is well formed, else a one-line reason.
  [[nodiscard]] const std::string& error() const { return m_error; }
  [[nodiscard]] bool failed() const { return !m_error.empty(); }

  // Bytes consumed so far.
  [[nodiscard]] uint64_t bytes_seen() const { return m_bytes_seen; }

 private:
  void process_line(std::string_view line, std::vector<SseEvent>& out);

  size_t m_max_event_bytes;
  std::string m_line;        // the current, unfinished line
  std::string m_data;        // data lines of the current event, each followed by '\n'
  std::string m_event_type;  // "event:" of the current event
  std::string m_last_id;
  bool m_has_data = false;
  bool m_after_cr = false;   // the previous byte was '\r': a following '\n' belongs to it
  bool m_first_line = true;  // a UTF-8 BOM at the start of the first line is skipped
  uint64_t m_bytes_seen = 0;
  std::string m_error;
};

}  // namespace kvprof::client
