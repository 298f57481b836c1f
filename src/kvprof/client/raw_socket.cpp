// Resolution and non-blocking connects for the raw transport (see raw_socket.hpp).
#include "kvprof/client/raw_socket.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace kvprof::client {

Expected<std::vector<SocketAddress>> resolve_host(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_protocol = IPPROTO_TCP;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    return fail(ErrorKind::network,
                fmt::format("Could not resolve host: {} ({})", host, gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(found, &freeaddrinfo);
  std::vector<SocketAddress> out;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_addrlen > sizeof(sockaddr_storage)) continue;
    SocketAddress a;
    std::memcpy(&a.storage, ai->ai_addr, ai->ai_addrlen);
    a.length = ai->ai_addrlen;
    out.push_back(a);
  }
  if (out.empty()) return fail(ErrorKind::network, fmt::format("Could not resolve host: {}", host));
  return out;
}

ConnectStart start_connect(const SocketAddress& address) {
  const int fd =
      socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) return {-1, errno};
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0 &&
      errno != EINPROGRESS) {
    const int error = errno;
    close(fd);
    return {-1, error};
  }
  return {fd, 0};
}

int socket_error(int fd) {
  int error = 0;
  socklen_t length = sizeof error;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
  return error;
}

std::string address_text(const SocketAddress& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.storage.ss_family == AF_INET6) {
    const auto* a6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
    inet_ntop(AF_INET6, &a6->sin6_addr, text, sizeof text);
    return fmt::format("[{}]:{}", text, ntohs(a6->sin6_port));
  }
  const auto* a4 = reinterpret_cast<const sockaddr_in*>(&address.storage);
  inet_ntop(AF_INET, &a4->sin_addr, text, sizeof text);
  return fmt::format("{}:{}", text, ntohs(a4->sin_port));
}

}  // namespace kvprof::client
