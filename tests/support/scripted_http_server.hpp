// A loopback HTTP/1.1 server for transport tests whose responses are raw bytes from a script
// (header-only, blocking sockets, one thread, one connection at a time): it reads each request
// (head + Content-Length body) and hands the socket to the script, which writes whatever bytes,
// in whatever pieces, and then keeps the connection, closes it or resets it.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace kvprof::testing {

// What the server does with a connection after the script answered a request.
enum class AfterResponse { keep, close, reset };

class ScriptedHttpServer {
 public:
  class Connection;
  // Called once per request with its index (0-based over the server's life) and raw head.
  using Script = std::function<AfterResponse(Connection&, uint64_t request_index)>;

  class Connection {
   public:
    Connection(int fd, ScriptedHttpServer& server) : m_fd(fd), m_server(server) {}
    // Writes `bytes` in pieces of at most `piece_bytes` (0: all at once); false when the peer
    // is gone.
    bool write(std::string_view bytes, size_t piece_bytes = 0) {
      const size_t step = piece_bytes == 0 ? bytes.size() : piece_bytes;
      for (size_t pos = 0; pos < bytes.size();) {
        const size_t n = std::min(step, bytes.size() - pos);
        if (!write_all(bytes.substr(pos, n))) return false;
        pos += n;
      }
      return true;
    }
    // Waits up to `ms` or until the server stops; true when it was told to stop.
    bool wait_ms(int ms) { return m_server.wait_for_stop(ms); }
    [[nodiscard]] const std::string& request_head() const { return m_head; }
    [[nodiscard]] const std::string& request_body() const { return m_body; }

   private:
    friend class ScriptedHttpServer;
    bool write_all(std::string_view bytes) {
      while (!bytes.empty()) {
        const ssize_t n = ::send(m_fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n <= 0) return false;
        bytes.remove_prefix(static_cast<size_t>(n));
      }
      return true;
    }
    int m_fd;
    ScriptedHttpServer& m_server;
    std::string m_head;
    std::string m_body;
    std::string m_pending;  // bytes read past the current request
  };

  explicit ScriptedHttpServer(Script script) : m_script(std::move(script)) {
    m_listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(m_listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(m_listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::listen(m_listen_fd, 64);
    socklen_t len = sizeof addr;
    ::getsockname(m_listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
    m_port = ntohs(addr.sin_port);
    m_thread = std::thread([this] { serve(); });
  }

  ~ScriptedHttpServer() {
    {
      std::lock_guard lock(m_mutex);
      m_stop = true;
    }
    m_stop_cv.notify_all();
    ::shutdown(m_listen_fd, SHUT_RDWR);
    m_thread.join();
    ::close(m_listen_fd);
  }
  ScriptedHttpServer(const ScriptedHttpServer&) = delete;
  ScriptedHttpServer& operator=(const ScriptedHttpServer&) = delete;

  [[nodiscard]] uint16_t port() const { return m_port; }
  [[nodiscard]] std::string url(std::string_view path = "/v1/completions") const {
    return "http://127.0.0.1:" + std::to_string(m_port) + std::string(path);
  }
  [[nodiscard]] uint64_t connections() const { return m_connections.load(); }
  [[nodiscard]] uint64_t requests() const { return m_requests.load(); }

  // Waits up to `ms` for the server to stop; true when it did.
  bool wait_for_stop(int ms) {
    std::unique_lock lock(m_mutex);
    return m_stop_cv.wait_for(lock, std::chrono::milliseconds(ms), [this] { return m_stop; });
  }

 private:
  bool stopping() {
    std::lock_guard lock(m_mutex);
    return m_stop;
  }

  // Reads one request into c.m_head / c.m_body; false when the peer closed or the server stops.
  bool read_request(Connection& c) {
    std::string& buf = c.m_pending;
    size_t head_end = std::string::npos;
    for (;;) {
      head_end = buf.find("\r\n\r\n");
      if (head_end != std::string::npos) break;
      if (!read_more(c.m_fd, buf)) return false;
    }
    c.m_head = buf.substr(0, head_end + 4);
    size_t content_length = 0;
    std::string lower = c.m_head;
    for (char& ch : lower)
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (const size_t p = lower.find("content-length:"); p != std::string::npos) {
      content_length = std::strtoull(lower.c_str() + p + 15, nullptr, 10);
    }
    while (buf.size() < head_end + 4 + content_length) {
      if (!read_more(c.m_fd, buf)) return false;
    }
    c.m_body = buf.substr(head_end + 4, content_length);
    buf.erase(0, head_end + 4 + content_length);
    return true;
  }

  bool read_more(int fd, std::string& buf) {
    for (;;) {
      if (stopping()) return false;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char tmp[4096];
      const ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
      if (n <= 0) return false;
      buf.append(tmp, static_cast<size_t>(n));
      return true;
    }
  }

  void serve() {
    while (!stopping()) {
      const int fd = ::accept4(m_listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        if (stopping()) return;
        continue;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      ++m_connections;
      Connection c(fd, *this);
      AfterResponse after = AfterResponse::keep;
      while (after == AfterResponse::keep && read_request(c)) {
        after = m_script(c, m_requests++);
      }
      if (after == AfterResponse::reset) {
        linger l{1, 0};
        ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      }
      ::close(fd);
    }
  }

  Script m_script;
  int m_listen_fd = -1;
  uint16_t m_port = 0;
  std::thread m_thread;
  std::mutex m_mutex;
  std::condition_variable m_stop_cv;
  bool m_stop = false;
  std::atomic<uint64_t> m_connections{0};
  std::atomic<uint64_t> m_requests{0};
};

// A response head with `status` and the given header lines (each without CRLF).
inline std::string http_head(int status, const std::vector<std::string>& headers) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " X\r\n";
  for (const auto& h : headers)
    out += h + "\r\n";
  return out + "\r\n";
}

}  // namespace kvprof::testing
