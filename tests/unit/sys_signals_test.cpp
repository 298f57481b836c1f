// The stop flag: a real SIGINT sets it and wakes poll() on stop_fd(); reset clears both.
#include "kvprof/sys/signals.hpp"

#include <gtest/gtest.h>
#include <poll.h>

#include <csignal>
#include <thread>

namespace kvprof::sys {
namespace {

using namespace std::chrono_literals;

bool fd_readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

TEST(Signals, SigintSetsFlagAndWakesPollers) {
  install_stop_handlers();
  reset_stop();
  ASSERT_GE(stop_fd(), 0);
  EXPECT_FALSE(stop_requested());
  EXPECT_FALSE(fd_readable(stop_fd()));
  EXPECT_FALSE(wait_for_stop(10ms));

  std::thread sender([] {
    std::this_thread::sleep_for(50ms);
    std::raise(SIGINT);
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(wait_for_stop(5s));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);  // woken, not timed out
  sender.join();
  EXPECT_TRUE(stop_requested());
  EXPECT_EQ(stop_signal(), SIGINT);
  EXPECT_TRUE(fd_readable(stop_fd()));
  EXPECT_TRUE(fd_readable(stop_fd()));  // stays readable for every waiter

  reset_stop();
  EXPECT_FALSE(stop_requested());
  EXPECT_EQ(stop_signal(), 0);
  EXPECT_FALSE(fd_readable(stop_fd()));
}

TEST(Signals, RequestStopFromAnotherThread) {
  install_stop_handlers();
  reset_stop();
  std::thread t([] { request_stop(); });
  t.join();
  EXPECT_TRUE(stop_requested());
  EXPECT_EQ(stop_signal(), 0);
  EXPECT_TRUE(fd_readable(stop_fd()));
  reset_stop();
}

}  // namespace
}  // namespace kvprof::sys
