// bench_loadgen's floor client: the least CPU any client that reads every stream as its bytes
// arrive can spend. It sends the same requests as kvprof's runner, then only reads: one
// edge-triggered epoll, plain recv() into one 64 KiB buffer until EAGAIN, no HTTP, SSE or JSON
// parsing, no timestamps; a stream ends when its bytes end with the chunked terminator. What it
// costs per token is the kernel's receive path (recv, the ACK it sends, epoll, wake-ups), so
// kvprof's CPU above it is all that kvprof's own code could still remove.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace kvprof::bench {

struct FloorRun {
  double user_s = 0, sys_s = 0, wall_s = 0;
  uint64_t streams_done = 0;  // streams that answered 200 and ended with the chunked terminator
  uint64_t reads = 0;         // recv() calls that returned bytes
  std::string error;          // the first failure, empty when none
};

// Runs `streams` concurrent streaming requests for `tokens_per_stream` tokens each against the
// loopback server on `port` and measures this process's CPU (getrusage) from the first connect
// to the last byte.
inline FloorRun run_floor_client(uint16_t port, uint32_t streams, uint32_t tokens_per_stream) {
  struct Stream {
    int fd = -1;
    bool checked_status = false;
    char tail[5] = {};
  };
  constexpr std::string_view k_end = "0\r\n\r\n";
  const std::string body = fmt::format(
      R"({{"model":"fake","prompt":[1000,1001,1002,1003],"max_tokens":{},"stream":true,)"
      R"("stream_options":{{"include_usage":true}}}})",
      tokens_per_stream);
  const std::string request = fmt::format(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n"
      "Content-Length: {}\r\n\r\n{}",
      port, body.size(), body);

  FloorRun run;
  const auto fail = [&run](std::string what) {
    if (run.error.empty()) run.error = std::move(what);
  };
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  std::vector<Stream> all(streams);
  uint64_t open_streams = 0;
  // Every connection first, then every request, so that no stream runs far ahead of the others
  // while the rest are still connecting.
  for (uint32_t i = 0; i < streams; ++i) {
    Stream& s = all[i];
    s.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int one = 1;
    setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(s.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      fail(fmt::format("stream {}: {}", i, std::strerror(errno)));
      close(s.fd);
      s.fd = -1;
    }
  }
  for (uint32_t i = 0; i < streams; ++i) {
    Stream& s = all[i];
    if (s.fd < 0) continue;
    if (send(s.fd, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
      fail(fmt::format("stream {}: {}", i, std::strerror(errno)));
      close(s.fd);
      s.fd = -1;
      continue;
    }
    fcntl(s.fd, F_SETFL, O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET | EPOLLRDHUP;
    ev.data.u32 = i;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, s.fd, &ev);
    ++open_streams;
  }
  std::vector<char> buffer(64 * 1024);
  std::vector<epoll_event> events(1024);
  const auto finish = [&](Stream& s) {
    close(s.fd);
    s.fd = -1;
    --open_streams;
  };
  while (open_streams > 0) {
    const int n = epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), 60'000);
    if (n <= 0) {
      fail(n == 0 ? "no data for 60 s" : std::strerror(errno));
      break;
    }
    for (int e = 0; e < n; ++e) {
      Stream& s = all[events[e].data.u32];
      while (s.fd >= 0) {
        const ssize_t got = recv(s.fd, buffer.data(), buffer.size(), 0);
        if (got > 0) {
          ++run.reads;
          const std::string_view bytes(buffer.data(), static_cast<size_t>(got));
          if (!s.checked_status) {
            s.checked_status = true;
            if (!bytes.starts_with("HTTP/1.1 200")) {
              fail("a response was not 200: " + std::string(bytes.substr(0, 40)));
              finish(s);
              break;
            }
          }
          // Keep the last 5 bytes of the stream: the terminator ends it.
          const size_t keep = std::min<size_t>(bytes.size(), 5);
          std::memmove(s.tail, s.tail + keep, 5 - keep);
          std::memcpy(s.tail + 5 - keep, bytes.data() + bytes.size() - keep, keep);
          if (std::string_view(s.tail, 5) == k_end) {
            ++run.streams_done;
            finish(s);
            break;
          }
          if (static_cast<size_t>(got) < buffer.size()) break;  // drained; the next edge wakes us
          continue;
        }
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        fail(got == 0 ? std::string("a stream closed before its end") : std::strerror(errno));
        finish(s);
      }
    }
  }
  for (Stream& s : all) {
    if (s.fd >= 0) close(s.fd);
  }
  close(epoll_fd);
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  getrusage(RUSAGE_SELF, &after);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
  };
  run.user_s = seconds(after.ru_utime) - seconds(before.ru_utime);
  run.sys_s = seconds(after.ru_stime) - seconds(before.ru_stime);
  return run;
}

}  // namespace kvprof::bench
