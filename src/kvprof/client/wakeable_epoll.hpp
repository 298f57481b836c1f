// The event loop core both HTTP transports share: an epoll set with an eventfd registered in it,
// so another thread can end a wait (Transport::wakeup).
#pragma once

#include <sys/epoll.h>

#include <cstdint>
#include <memory>

namespace kvprof::client {

class WakeableEpoll {
 public:
  // The epoll data of the wake event; no connection's data can equal it.
  static constexpr uint64_t k_wake_tag = ~uint64_t{0};

  // Creates the epoll set and the registered eventfd; nullptr when the kernel refuses either.
  static std::unique_ptr<WakeableEpoll> create();

  ~WakeableEpoll();
  WakeableEpoll(const WakeableEpoll&) = delete;
  WakeableEpoll& operator=(const WakeableEpoll&) = delete;

  // The epoll descriptor, for epoll_ctl and epoll_wait.
  [[nodiscard]] int fd() const { return m_epoll_fd; }

  // True when `event` is the wake event, whose count it then drains; false for any other event.
  bool take_wake(const epoll_event& event);

  // Ends the current or the next epoll_wait on fd(); safe from any thread.
  void wake();

 private:
  WakeableEpoll(int epoll_fd, int wake_fd) : m_epoll_fd(epoll_fd), m_wake_fd(wake_fd) {}
  int m_epoll_fd;
  int m_wake_fd;
};

}  // namespace kvprof::client
