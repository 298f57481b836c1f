// Connections and the keep-alive pool of the raw transport (see raw_pool.hpp).
#include "kvprof/client/raw_pool.hpp"

#include <fmt/format.h>
#include <unistd.h>

namespace kvprof::client {

RawConnectionPool::~RawConnectionPool() {
  for (auto& c : m_open)
    if (c->fd >= 0) ::close(c->fd);
}

RawEndpoint& RawConnectionPool::endpoint(const std::string& host, uint16_t port) {
  std::string key = fmt::format("{}:{}", host, port);
  if (auto it = m_endpoints.find(key); it != m_endpoints.end()) return *it->second;
  auto e = std::make_unique<RawEndpoint>();
  e->name = key;
  if (auto addresses = resolve_host(host, port)) {
    e->addresses = std::move(*addresses);
  } else {
    e->resolve_error = addresses.error().message;
  }
  return *m_endpoints.emplace(std::move(key), std::move(e)).first->second;
}

RawConnection* RawConnectionPool::take_idle(RawEndpoint& e) {
  if (e.idle.empty()) return nullptr;
  RawConnection* c = e.idle.back();
  e.idle.pop_back();
  c->reused = true;
  c->state = RawConnState::sending;
  return c;
}

RawConnection& RawConnectionPool::adopt(int fd, RawEndpoint& e) {
  auto owned = std::make_unique<RawConnection>(m_limits);
  RawConnection& c = *owned;
  c.fd = fd;
  c.endpoint = &e;
  c.slot = m_open.size();
  m_open.push_back(std::move(owned));
  return c;
}

void RawConnectionPool::release(RawConnection& c) {
  RawEndpoint& e = *c.endpoint;
  if (m_max_idle_per_host > 0 && e.idle.size() >= m_max_idle_per_host) {
    close(c);
    return;
  }
  c.state = RawConnState::idle;
  c.parser.reset();
  c.idle_index = e.idle.size();
  e.idle.push_back(&c);
}

void RawConnectionPool::close(RawConnection& c) {
  if (c.state == RawConnState::closed) return;
  if (c.state == RawConnState::idle) {
    auto& idle = c.endpoint->idle;
    idle[c.idle_index] = idle.back();
    idle[c.idle_index]->idle_index = c.idle_index;
    idle.pop_back();
  }
  c.state = RawConnState::closed;
  ::close(c.fd);
  c.fd = -1;
  const size_t slot = c.slot;
  m_closed.push_back(std::move(m_open[slot]));
  if (slot + 1 != m_open.size()) {
    m_open[slot] = std::move(m_open.back());
    m_open[slot]->slot = slot;
  }
  m_open.pop_back();
}

}  // namespace kvprof::client
