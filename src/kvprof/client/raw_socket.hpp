// Socket helpers of the raw transport: name resolution and non-blocking TCP connects.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::client {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
};

// The addresses of `host` (a name or a numeric IPv4/IPv6 address) at `port`, in the resolver's
// order of preference; a network error when the name does not resolve. Blocks while a name is
// looked up (numeric hosts never do).
Expected<std::vector<SocketAddress>> resolve_host(const std::string& host, uint16_t port);

struct ConnectStart {
  int fd = -1;    // a non-blocking, close-on-exec TCP socket with TCP_NODELAY; -1 on failure
  int error = 0;  // errno of the failure when fd is -1
};

// Starts connecting to `address` without blocking (the connect finishes when the socket turns
// writable; socket_error() then says how it went).
ConnectStart start_connect(const SocketAddress& address);

// The pending error of `fd` (SO_ERROR): 0 when its connect succeeded.
int socket_error(int fd);

// "127.0.0.1:8000" / "[::1]:8000", for messages.
std::string address_text(const SocketAddress& address);

}  // namespace kvprof::client
