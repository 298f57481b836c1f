// Tests for src/kvprof/report/progress_line.cpp: the status line rendered into a string with the
// terminal on and off, colour on, off and under NO_COLOR, the rate limit on a fake clock, ETA.
#include "kvprof/report/text/progress_line.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace kvprof::report::text {
namespace {

struct Capture {
  std::string out;
  double now_s = 0;
  ProgressLine make(TerminalStyle style, double plain_interval_s = 30.0) {
    return ProgressLine(
        style, [this](std::string_view b) { out.append(b); }, "kvprof: ", 0.2, plain_interval_s,
        [this] { return now_s; });
  }
};

TEST(ProgressLine, OnATerminalTheStatusIsRewrittenInPlaceAtMostFiveTimesASecond) {
  Capture c;
  {
    auto p = c.make({.tty = true, .color = false, .columns = 80});
    p.status("1/4 done");
    c.now_s = 0.1;
    p.status("2/4 done");  // too soon: not drawn
    c.now_s = 0.3;
    p.status("3/4 done");
    p.line("condition ended");
    p.status("4/4 done");  // drawn at once after a line that stays
  }                        // the destructor keeps the last status on screen
  EXPECT_EQ(c.out,
            "\rkvprof: 1/4 done\033[K"
            "\rkvprof: 3/4 done\033[K"
            "\r\033[Kkvprof: condition ended\n"
            "\rkvprof: 4/4 done\033[K"
            "\n");
}

TEST(ProgressLine, ElsewhereStatusesArePlainLinesAtTheirOwnPace) {
  Capture c;
  auto p = c.make({.tty = false, .color = false, .columns = 80}, 10.0);
  p.status("1/4 done");
  c.now_s = 5;
  p.status("2/4 done");  // within 10 s of the last: dropped
  p.line("a warning", Tone::warn);
  c.now_s = 11;
  p.status("3/4 done");
  p.finish();
  EXPECT_EQ(c.out, "kvprof: 1/4 done\nkvprof: a warning\nkvprof: 3/4 done\n");
  EXPECT_EQ(c.out.find('\r'), std::string::npos);
  EXPECT_EQ(c.out.find('\033'), std::string::npos);

  Capture quiet_status;
  auto q = quiet_status.make({.tty = false, .color = false, .columns = 80}, 0.0);
  q.status("never shown");
  q.line("shown");
  EXPECT_EQ(quiet_status.out, "kvprof: shown\n");
}

TEST(ProgressLine, ColourOnlyWhenTheStyleSaysSo) {
  Capture c;
  auto p = c.make({.tty = true, .color = true, .columns = 80});
  p.line("interrupted", Tone::warn);
  p.line("failed", Tone::bad);
  p.line("done", Tone::good);
  EXPECT_NE(c.out.find("\033[33minterrupted\033[0m"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("\033[31mfailed\033[0m"), std::string::npos);
  EXPECT_NE(c.out.find("\033[32mdone\033[0m"), std::string::npos);
  EXPECT_NE(c.out.find("\033[2mkvprof: \033[0m"), std::string::npos);
  EXPECT_EQ(paint({.tty = true, .color = false, .columns = 80}, Tone::bad, "x"), "x");
}

TEST(ProgressLine, AStatusWiderThanTheTerminalIsClipped) {
  Capture c;
  auto p = c.make({.tty = true, .color = true, .columns = 20});
  p.status(std::string(50, 'x'), Tone::good);
  // 19 visible characters: "kvprof: " and 11 x's, the colour reset at the cut.
  EXPECT_EQ(c.out, "\r\033[2mkvprof: \033[0m\033[32m" + std::string(11, 'x') + "\033[0m\033[K");
}

TEST(TerminalStyle, NotATerminalHasNoColourAndNoColorTurnsItOff) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const auto pipe_style = terminal_style(fds[1], false);
  EXPECT_FALSE(pipe_style.tty);
  EXPECT_FALSE(pipe_style.color);
  ::close(fds[0]);
  ::close(fds[1]);
  // A pseudo-terminal: colour unless NO_COLOR or --no-color.
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const int tty = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(tty, 0);
  ::unsetenv("NO_COLOR");
  EXPECT_TRUE(terminal_style(tty, false).tty);
  EXPECT_TRUE(terminal_style(tty, false).color);
  EXPECT_FALSE(terminal_style(tty, true).color);
  ::setenv("NO_COLOR", "1", 1);
  EXPECT_TRUE(terminal_style(tty, false).tty);
  EXPECT_FALSE(terminal_style(tty, false).color);
  ::setenv("NO_COLOR", "", 1);  // set but empty: no effect (no-color.org)
  EXPECT_TRUE(terminal_style(tty, false).color);
  ::unsetenv("NO_COLOR");
  ::close(tty);
  ::close(master);
}

TEST(Eta, FromTheShareDoneAndTheTimeItTook) {
  EXPECT_FALSE(eta_s(0, 10, 5.0).has_value());
  EXPECT_DOUBLE_EQ(*eta_s(2, 10, 5.0), 20.0);
  EXPECT_DOUBLE_EQ(*eta_s(10, 10, 5.0), 0.0);
  EXPECT_EQ(eta_text(eta_s(1, 3, 32.5)), "ETA 1m05s");
  EXPECT_EQ(eta_text(std::nullopt), "ETA -");
  EXPECT_EQ(short_duration(0.44), "0.4s");
  EXPECT_EQ(short_duration(12.4), "12s");
  EXPECT_EQ(short_duration(7380), "2h03m");
}

}  // namespace
}  // namespace kvprof::report::text
