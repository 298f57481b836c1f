// run_command: exit codes, captured streams, environment overrides, deadlines, missing programs.
#include "kvprof/sys/subprocess.hpp"

#include <gtest/gtest.h>

#include <csignal>

namespace kvprof::sys {
namespace {

using namespace std::chrono_literals;

TEST(RunCommand, CapturesBothStreamsAndExitCode) {
  auto r = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"});
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->stdout_text, "out\n");
  EXPECT_EQ(r->stderr_text, "err\n");
  EXPECT_FALSE(r->timed_out);
}

TEST(RunCommand, EnvironmentOverrides) {
  CommandOptions o;
  o.env = {{"KVPROF_TEST_VALUE", "forty two"}};
  auto r = run_command({"sh", "-c", "printf %s \"$KVPROF_TEST_VALUE\""}, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->stdout_text, "forty two");
}

TEST(RunCommand, DeadlineKillsTheWholeGroup) {
  CommandOptions o;
  o.timeout = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  // The grandchild keeps the pipe open: killing only the shell would hang.
  auto r = run_command({"sh", "-c", "sleep 30 & sleep 30"}, o);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->term_signal, SIGKILL);
  EXPECT_LT(took, 5s);
}

TEST(RunCommand, OutputIsBounded) {
  CommandOptions o;
  o.max_output_bytes = 100;
  auto r = run_command({"sh", "-c", "yes | head -c 100000"}, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(r->stdout_text.size(), 100U);
}

TEST(RunCommand, MissingProgramIsNotFound) {
  auto r = run_command({"kvprof-no-such-program-xyz"});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, ErrorKind::not_found);
  EXPECT_FALSE(find_executable("sh", "/nonexistent-dir").has_value());
  EXPECT_TRUE(find_executable("sh", "/nonexistent-dir:/bin:/usr/bin").has_value());
}

}  // namespace
}  // namespace kvprof::sys
