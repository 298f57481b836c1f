// Incremental Server-Sent Events parser (the WHATWG event-stream format): bytes may arrive split
// anywhere, lines end in \n, \r\n or \r, multi-line data is joined with \n, comments are ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kvprof::client {

// One dispatched event as views; what they point at is valid only while the view is in use
// (during the feed callback, or while the SseEvent it came from lives).
struct SseEventView {
  std::string_view type = "message";  // the "event:" field, "message" when absent
  std::string_view data;              // the "data:" lines joined with '\n'
  std::string_view id;                // the last "id:" field seen, empty when none
};

// One dispatched event that owns its text.
struct SseEvent {
  std::string type = "message";
  std::string data;
  std::string id;

  // NOLINTNEXTLINE(google-explicit-constructor): an event is usable wherever a view is.
  operator SseEventView() const { return {type, data, id}; }
};

class SseParser {
 public:
  static constexpr size_t k_default_max_event_bytes = 4 * 1024 * 1024;

  explicit SseParser(size_t max_event_bytes = k_default_max_event_bytes)
      : m_max_event_bytes(max_event_bytes) {}

  // Consumes `bytes` and calls `on_event(const SseEventView&) -> bool` for every event they
  // complete, without copying it. Returns false (and ignores all later input) once a line or an
  // event's data exceeds the size bound; error() then says why. When `on_event` returns false
  // the parser stops there and ignores all later input, but that is not an error.
  template <class OnEvent>
  bool feed(std::string_view bytes, OnEvent&& on_event) {
    using Fn = std::remove_reference_t<OnEvent>;  // may be const
    const Handler handler{const_cast<void*>(static_cast<const void*>(&on_event)),
                          [](void* fn, const SseEventView& event) {
                            return static_cast<bool>((*static_cast<Fn*>(fn))(event));
                          }};
    return feed_to(bytes, handler);
  }

  // Consumes `bytes` and appends a copy of every event completed by them to `out`.
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
  // The event callback without a template: `call(fn, event)` runs the caller's `on_event`.
  struct Handler {
    void* fn;
    bool (*call)(void* fn, const SseEventView& event);
  };

  bool feed_to(std::string_view bytes, Handler handler);
  void process_line(std::string_view line, Handler handler);

  size_t m_max_event_bytes;
  std::string m_line;        // the current, unfinished line
  std::string m_data;        // data lines of the current event, each followed by '\n'
  std::string m_event_type;  // "event:" of the current event
  std::string m_last_id;
  bool m_has_data = false;
  bool m_after_cr = false;   // the previous byte was '\r': a following '\n' belongs to it
  bool m_first_line = true;  // a UTF-8 BOM at the start of the first line is skipped
  bool m_stopped = false;    // a handler returned false: later input is ignored
  uint64_t m_bytes_seen = 0;
  std::string m_error;
};

}  // namespace kvprof::client
