// Test-only: a TCP socket bound to a port the kernel picks on 127.0.0.1, for tests that need a
// port nobody uses (close it, then start a server there) or one that is taken (keep it listening).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace kvprof::test {

// Owns the bound socket; ok() is false when socket/bind/listen failed. Closed when destroyed.
class LoopbackPort {
 public:
  // Binds a kernel-chosen loopback port; listens with BACKLOG when `listen` is true.
  explicit LoopbackPort(bool listen, int backlog = 4) {
    m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (m_fd < 0) return;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(m_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        (listen && ::listen(m_fd, backlog) != 0) ||
        ::getsockname(m_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      close();
      return;
    }
    m_port = ntohs(addr.sin_port);
  }
  LoopbackPort(const LoopbackPort&) = delete;
  LoopbackPort& operator=(const LoopbackPort&) = delete;
  ~LoopbackPort() { close(); }

  // True when the port was bound (and listened on, where asked).
  bool ok() const { return m_port != 0; }
  // The bound port number; 0 when binding failed.
  uint16_t port() const { return m_port; }
  // The port number as text, for command lines and URLs.
  std::string port_text() const { return std::to_string(m_port); }
  // Frees the port (for a server the test starts on it next); the number stays readable.
  void close() {
    if (m_fd >= 0) ::close(m_fd);
    m_fd = -1;
  }

 private:
  int m_fd = -1;
  uint16_t m_port = 0;
};

}  // namespace kvprof::test
