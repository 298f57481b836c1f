// The stop flag, its self-pipe and the async-signal-safe handler.
#include "kvprof/sys/signals.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <mutex>

namespace kvprof::sys {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};
std::atomic<int> g_pipe_read{-1};
std::atomic<int> g_pipe_write{-1};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

void wake() {
  const int fd = g_pipe_write.load();
  if (fd < 0) return;
  const char byte = 1;
  // Non-blocking: a full pipe is already readable, which is all that matters.
  [[maybe_unused]] const ssize_t n = ::write(fd, &byte, 1);
}

void handle_stop_signal(int signo) {
  const int saved_errno = errno;
  if (g_stop.exchange(true)) {
    // Second signal: the user insists; die the default way.
    std::signal(signo, SIG_DFL);
    std::raise(signo);
  } else {
    g_signal.store(signo);
    wake();
  }
  errno = saved_errno;
}

std::once_flag g_install_once;

}  // namespace

void install_stop_handlers() {
  std::call_once(g_install_once, [] {
    int fds[2];
    if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0) {
      g_pipe_read.store(fds[0]);
      g_pipe_write.store(fds[1]);
    }
    if (g_stop.load()) wake();
    struct sigaction action {};
    action.sa_handler = handle_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &action, nullptr);
    ::sigaction(SIGTERM, &action, nullptr);
    ::sigaction(SIGHUP, &action, nullptr);  // a closed terminal or ssh session: stop the same way
  });
}

bool stop_requested() {
  return g_stop.load();
}

int stop_signal() {
  return g_signal.load();
}

int stop_fd() {
  return g_pipe_read.load();
}

void request_stop() {
  if (!g_stop.exchange(true)) wake();
}

bool wait_for_stop(std::chrono::milliseconds timeout) {
  if (g_stop.load()) return true;
  const int fd = g_pipe_read.load();
  const int timeout_ms = static_cast<int>(std::max<long long>(0, timeout.count()));
  if (fd < 0) {
    ::usleep(static_cast<useconds_t>(timeout_ms) * 1000);
  } else {
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, timeout_ms);  // EINTR: fall through and report the flag
  }
  return g_stop.load();
}

void reset_stop() {
  const int fd = g_pipe_read.load();
  if (fd >= 0) {
    char buffer[64];
    while (::read(fd, buffer, sizeof buffer) > 0) {
    }
  }
  g_signal.store(0);
  g_stop.store(false);
}

}  // namespace kvprof::sys
