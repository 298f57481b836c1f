// Tests for src/kvprof/client/wakeable_epoll.cpp and that the transports built on it give back
// their descriptors.
#include "kvprof/client/wakeable_epoll.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iterator>
#include <thread>

#include "kvprof/client/transport.hpp"

namespace kvprof::client {
namespace {

size_t open_fd_count() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                           std::filesystem::directory_iterator{}));
}

TEST(WakeableEpoll, AWakeFromAnotherThreadEndsTheWaitAndIsDrained) {
  auto epoll = WakeableEpoll::create();
  ASSERT_TRUE(epoll);
  const auto t0 = std::chrono::steady_clock::now();
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    epoll->wake();
  });
  epoll_event event{};
  ASSERT_EQ(epoll_wait(epoll->fd(), &event, 1, 5000), 1);
  waker.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  EXPECT_TRUE(epoll->take_wake(event));
  // Drained: the next wait times out instead of seeing the same wake again.
  EXPECT_EQ(epoll_wait(epoll->fd(), &event, 1, 20), 0);
  epoll_event other{};
  other.data.u64 = 7;
  EXPECT_FALSE(epoll->take_wake(other));
}

TEST(WakeableEpoll, TransportsCloseEveryDescriptorTheyOpen) {
  for (const TransportKind kind : {TransportKind::raw, TransportKind::curl}) {
    make_transport(kind, "http://127.0.0.1:1/v1", RawOptions{}).reset();  // first-use set-up
    const size_t before = open_fd_count();
    for (int i = 0; i < 20; ++i) {
      auto transport = make_transport(kind, "http://127.0.0.1:1/v1", RawOptions{});
      ASSERT_TRUE(transport) << transport_kind_name(kind);
    }
    EXPECT_EQ(open_fd_count(), before) << transport_kind_name(kind);
  }
}

}  // namespace
}  // namespace kvprof::client
