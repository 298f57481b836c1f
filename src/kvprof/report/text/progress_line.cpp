// The terminal status line and plain progress lines.
#include "kvprof/report/text/progress_line.hpp"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kvprof::report::text {

TerminalStyle terminal_style(int fd, bool no_color) {
  TerminalStyle s;
  s.tty = ::isatty(fd) == 1;
  const char* env = std::getenv("NO_COLOR");
  s.color = s.tty && !no_color && (env == nullptr || *env == '\0');
  winsize ws{};
  if (s.tty && ::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) s.columns = ws.ws_col;
  return s;
}

Tone tone_of(std::string_view line) {
  if (line.starts_with("warning:") || line.find("INTERRUPTED") != std::string_view::npos ||
      line.find("interrupted") != std::string_view::npos) {
    return Tone::warn;
  }
  if (line.starts_with("error:") || line.find(": failed") != std::string_view::npos) {
    return Tone::bad;
  }
  return Tone::plain;
}

std::string paint(const TerminalStyle& style, Tone tone, std::string_view text) {
  if (!style.color || tone == Tone::plain) return std::string(text);
  const char* code = tone == Tone::good   ? "32"
                     : tone == Tone::warn ? "33"
                     : tone == Tone::bad  ? "31"
                                          : "2";
  return fmt::format("\033[{}m{}\033[0m", code, text);
}

std::optional<double> eta_s(double done, double total, double elapsed_s) {
  if (!(done > 0) || !(elapsed_s >= 0) || !std::isfinite(elapsed_s)) return std::nullopt;
  return std::max(0.0, total - done) * elapsed_s / done;
}

std::string short_duration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "-";
  if (seconds < 10) return fmt::format("{:.1f}s", seconds);
  const auto s = static_cast<uint64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

std::string eta_text(std::optional<double> seconds) {
  return "ETA " + (seconds ? short_duration(*seconds) : std::string("-"));
}

namespace {

double steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The visible width of `text` (ANSI escapes and UTF-8 continuation bytes not counted).
size_t visible_width(std::string_view text) {
  size_t n = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\033') {
      while (i < text.size() && text[i] != 'm')
        ++i;
      continue;
    }
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++n;
  }
  return n;
}

// `text` cut to `width` visible characters (escapes kept, a reset added when cut).
std::string clip(std::string_view text, size_t width) {
  if (visible_width(text) <= width) return std::string(text);
  std::string out;
  size_t n = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\033') {
      const size_t end = text.find('m', i);
      out.append(text.substr(i, end == std::string_view::npos ? text.size() - i : end - i + 1));
      i = end == std::string_view::npos ? text.size() : end;
      continue;
    }
    const bool starts_char = (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    if (starts_char && n == width) break;
    if (starts_char) ++n;
    out.push_back(text[i]);
  }
  return out + "\033[0m";
}

}  // namespace

ProgressLine::ProgressLine(TerminalStyle style, Sink sink, std::string prefix,
                           double min_interval_s, double plain_interval_s, Clock clock)
    : m_style(style),
      m_sink(std::move(sink)),
      m_prefix(std::move(prefix)),
      m_min_interval_s(min_interval_s),
      m_plain_interval_s(plain_interval_s),
      m_clock(clock ? std::move(clock) : Clock(steady_s)) {}

ProgressLine::~ProgressLine() {
  finish();
}

void ProgressLine::draw_status_locked() {
  const std::string text = paint(m_style, Tone::dim, m_prefix) + m_status;
  if (m_style.tty) {
    // Carriage return, the line, then erase what a longer earlier line left to its right.
    m_sink("\r" + clip(text, m_style.columns > 1 ? m_style.columns - 1 : 79) + "\033[K");
    m_status_shown = true;
  } else {
    m_sink(text + "\n");
  }
  m_last_draw_s = m_clock();
}

void ProgressLine::status(std::string_view text, Tone tone) {
  std::lock_guard lock(m_mutex);
  m_status = paint(m_style, tone, text);
  const double now = m_clock();
  const double interval = m_style.tty ? m_min_interval_s : m_plain_interval_s;
  if (!m_style.tty && interval <= 0) return;
  if (now - m_last_draw_s < interval) return;
  draw_status_locked();
}

void ProgressLine::line(std::string_view text, Tone tone) {
  std::lock_guard lock(m_mutex);
  std::string out;
  if (m_status_shown) out = "\r\033[K";
  out += paint(m_style, Tone::dim, m_prefix) + paint(m_style, tone, text) + "\n";
  m_sink(out);
  m_status_shown = false;
  // The old status is stale after a line that stays: the next status() draws at once.
  m_status.clear();
  if (m_style.tty) m_last_draw_s = -1e300;
}

void ProgressLine::finish() {
  std::lock_guard lock(m_mutex);
  if (m_status_shown) m_sink("\n");
  m_status_shown = false;
  m_status.clear();
}

std::unique_ptr<ProgressLine> stderr_progress(bool no_color) {
  return std::make_unique<ProgressLine>(terminal_style(STDERR_FILENO, no_color),
                                        [](std::string_view bytes) {
                                          std::fwrite(bytes.data(), 1, bytes.size(), stderr);
                                          std::fflush(stderr);
                                        });
}

}  // namespace kvprof::report::text
