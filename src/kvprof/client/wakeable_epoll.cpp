// epoll + eventfd for the transports' event loops (see wakeable_epoll.hpp).
#include "kvprof/client/wakeable_epoll.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

namespace kvprof::client {

std::unique_ptr<WakeableEpoll> WakeableEpoll::create() {
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  const int wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = k_wake_tag;
  if (epoll_fd < 0 || wake_fd < 0 || epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev) != 0) {
    if (epoll_fd >= 0) close(epoll_fd);
    if (wake_fd >= 0) close(wake_fd);
    return nullptr;
  }
  return std::unique_ptr<WakeableEpoll>(new WakeableEpoll(epoll_fd, wake_fd));
}

WakeableEpoll::~WakeableEpoll() {
  close(m_wake_fd);
  close(m_epoll_fd);
}

bool WakeableEpoll::take_wake(const epoll_event& event) {
  if (event.data.u64 != k_wake_tag) return false;
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t drained = read(m_wake_fd, &count, sizeof count);
  return true;
}

void WakeableEpoll::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = write(m_wake_fd, &one, sizeof one);
}

}  // namespace kvprof::client
