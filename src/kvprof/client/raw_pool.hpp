// The raw transport's connections: each socket with its state and response parser, the
// endpoints (host:port, resolved once), and the idle kept-alive connections pooled per endpoint.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvprof/client/http_response_parser.hpp"
#include "kvprof/client/raw_socket.hpp"

namespace kvprof::client {

struct RawTransfer;  // one request in flight (raw_transport.cpp)
struct RawConnection;

struct RawEndpoint {
  std::string name;  // host:port, for messages
  std::vector<SocketAddress> addresses;
  std::string resolve_error;         // set when the host does not resolve
  std::vector<RawConnection*> idle;  // most recently used last
};

enum class RawConnState { connecting, sending, receiving, idle, closed };

struct RawConnection {
  explicit RawConnection(const HttpParserLimits& limits) : parser(limits) {}
  int fd = -1;
  RawConnState state = RawConnState::connecting;
  RawEndpoint* endpoint = nullptr;
  RawTransfer* transfer = nullptr;  // null unless connecting, sending or receiving
  HttpResponseParser parser;
  size_t slot = 0;           // index in the pool's table of open connections
  size_t idle_index = 0;     // index in endpoint->idle while idle
  bool reused = false;       // carries its second or later request
  bool in_ready = false;     // waiting in the transport's ready list for more reads
  bool peer_closed = false;  // that ready-list read must go on until it sees the close
};

class RawConnectionPool {
 public:
  RawConnectionPool(HttpParserLimits limits, size_t max_idle_per_host)
      : m_limits(limits), m_max_idle_per_host(max_idle_per_host) {}
  // Closes every socket.
  ~RawConnectionPool();
  RawConnectionPool(const RawConnectionPool&) = delete;
  RawConnectionPool& operator=(const RawConnectionPool&) = delete;

  // The endpoint for host:port, resolved on first use (resolve_error says when that failed).
  RawEndpoint& endpoint(const std::string& host, uint16_t port);
  // The most recently used idle connection to `e`, out of the pool; nullptr when none.
  RawConnection* take_idle(RawEndpoint& e);
  // A new connection (state connecting) owning the socket `fd` to `e`.
  RawConnection& adopt(int fd, RawEndpoint& e);
  // Makes `c`, whose response ended cleanly, idle in its endpoint's pool; closes it instead
  // when that pool is full.
  void release(RawConnection& c);
  // Closes `c`'s socket (which takes it out of epoll) and any pool it is in; the object
  // lives on, state closed, until free_closed().
  void close(RawConnection& c);
  // Frees the closed connections; call only when no pointer to them is left.
  void free_closed() { m_closed.clear(); }
  [[nodiscard]] size_t open_count() const { return m_open.size(); }

 private:
  HttpParserLimits m_limits;
  size_t m_max_idle_per_host;
  std::unordered_map<std::string, std::unique_ptr<RawEndpoint>> m_endpoints;
  std::vector<std::unique_ptr<RawConnection>> m_open;
  std::vector<std::unique_ptr<RawConnection>> m_closed;
};

}  // namespace kvprof::client
