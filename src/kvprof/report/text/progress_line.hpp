// The progress of a long command on stderr: on a terminal one status line rewritten in place
// (carriage return, at most a few times a second, the last one kept) in colour; anywhere else
// (CI logs, pipes, tests) plain lines without colour. Colour is off with NO_COLOR
// (https://no-color.org) or --no-color. Used by profile, bench, sweep and find-max.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace kvprof::report::text {

// How a piece of text is coloured on a terminal.
enum class Tone { plain, good, warn, bad, dim };

struct TerminalStyle {
  bool tty = false;     // a status line is rewritten in place
  bool color = false;   // ANSI colours
  size_t columns = 80;  // a status line is clipped to this width on a terminal
};

// The style for file descriptor `fd`: tty when it is a terminal (width from the terminal),
// colour only on a terminal and not when the environment has a non-empty NO_COLOR or `no_color`
// is set. Never fails.
TerminalStyle terminal_style(int fd, bool no_color);

// The tone of a progress line by its words: warn for a warning or an interruption, bad for an
// error or a failure, plain otherwise.
Tone tone_of(std::string_view line);

// `text` wrapped in `tone`'s ANSI colour when style.color, else `text` unchanged.
std::string paint(const TerminalStyle& style, Tone tone, std::string_view text);

// The seconds left when `done` of `total` took `elapsed_s` at the same pace; nullopt before
// anything is done.
std::optional<double> eta_s(double done, double total, double elapsed_s);
// A duration for a progress line: "0.4s", "12s", "1m05s", "2h03m".
std::string short_duration(double seconds);
// "ETA 1m05s" for `eta_s`'s answer, "ETA -" when it has none.
std::string eta_text(std::optional<double> seconds);

class ProgressLine {
 public:
  using Sink = std::function<void(std::string_view)>;  // writes (and flushes) bytes
  using Clock = std::function<double()>;               // monotonic seconds

  // Writes to `sink`, each line prefixed with `prefix` ("kvprof: "). A status is redrawn at most
  // every `min_interval_s` on a terminal; elsewhere printed as a line at most every
  // `plain_interval_s` (0: never). `clock` defaults to steady_clock.
  ProgressLine(TerminalStyle style, Sink sink,
               std::string prefix = "kvprof: ", double min_interval_s = 0.2,
               double plain_interval_s = 30.0, Clock clock = {});
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // A status that the next one replaces (see the constructor for how often it shows).
  void status(std::string_view text, Tone tone = Tone::plain);
  // A line that stays. On a terminal the status line is cleared first; the next status() is
  // drawn at once below it.
  void line(std::string_view text, Tone tone = Tone::plain);
  // Ends the status line: on a terminal the last status stays on screen; nothing more is drawn
  // until the next status. Called by the destructor.
  void finish();

  [[nodiscard]] const TerminalStyle& style() const { return m_style; }

 private:
  void draw_status_locked();

  TerminalStyle m_style;
  Sink m_sink;
  std::string m_prefix;
  double m_min_interval_s;
  double m_plain_interval_s;
  Clock m_clock;
  std::mutex m_mutex;
  std::string m_status;         // the latest status text, painted
  bool m_status_shown = false;  // on a terminal: the status line is on screen, unterminated
  double m_last_draw_s = -1e300;
};

// A ProgressLine on stderr with terminal_style(STDERR_FILENO, no_color).
std::unique_ptr<ProgressLine> stderr_progress(bool no_color);

}  // namespace kvprof::report::text
