// The raw HTTP/1.1 Transport for http:// URLs: non-blocking sockets on one edge-triggered
// epoll, the request written from one prebuilt buffer, responses read 64 KiB per recvmsg into
// one reused buffer and parsed in place (body bytes go to the sink as views, never copied), idle
// keep-alive connections pooled per host:port, and every request's deadline in one heap.
//
// Arrival times: each socket has SO_TIMESTAMPNS on, so every read carries the kernel's receive
// time of its newest segment (CLOCK_REALTIME, moved onto CLOCK_MONOTONIC with an offset taken
// each turn, and kept between the request's start and the read). How late the loop reads then
// changes no time except that events sharing one read share the newest one's time, which is
// what `read_interval_us` trades for fewer reads: while data flows, the loop sleeps out the rest
// of the interval before it waits for events again (never past the caller's timeout or a
// deadline), so busy streams are read once per interval, not once per token.
//
// Outcomes follow the libcurl transport: no connection (refused, unresolvable, bad URL, connect
// timeout, or the request timeout while still connecting) is `connect`; a connection that broke
// or closed before the response ended is `reset`, and so is a malformed chunked body; an
// oversized or malformed status line or headers are `other`. A request whose kept-alive
// connection turns out closed before any response byte is sent once more on a new connection,
// as libcurl does.
// Sinks must not call start() or cancel() from their callbacks.
#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <deque>
#include <optional>
#include <unordered_map>

#include "kvprof/client/deadline_heap.hpp"
#include "kvprof/client/http_response_parser.hpp"
#include "kvprof/client/raw_pool.hpp"
#include "kvprof/client/raw_request.hpp"
#include "kvprof/client/raw_socket.hpp"
#include "kvprof/client/transport.hpp"
#include "kvprof/client/wakeable_epoll.hpp"

namespace kvprof::client {

namespace {
constexpr int64_t k_no_deadline = std::numeric_limits<int64_t>::max();
}  // namespace

// One request in flight (or ended inside start(), waiting for poll() to report it).
struct RawTransfer final : HttpResponseHandler {
  uint64_t handle = 0;
  StreamSink* sink = nullptr;
  RawEndpoint* endpoint = nullptr;
  RawConnection* conn = nullptr;
  std::string wire;  // the request bytes
  size_t wire_sent_bytes = 0;
  int64_t start_ns = 0;
  int64_t request_deadline_ns = k_no_deadline;
  int64_t connect_timeout_ns = k_no_deadline;
  int64_t deadline_ns = k_no_deadline;  // the heap's key
  int64_t arrival_ns = 0;               // when the bytes being parsed arrived
  size_t heap_index = DeadlineHeap<RawTransfer>::k_absent;
  size_t next_address = 0;  // the next of the endpoint's addresses to try
  int last_connect_errno = 0;
  bool connected = false;  // a connection for it was established at some point
  bool retried = false;    // already resent once after a stale keep-alive connection
  std::optional<TransportResult> early_result;  // ended inside start(): delivered by poll()

  void on_response_status(int http_status) override { sink->on_status(http_status); }
  bool on_response_body(std::string_view bytes) override {
    return sink->on_data(bytes, arrival_ns);
  }
};

namespace {

constexpr int k_max_events = 1024;
// Reads from one socket per turn before others get theirs (the rest waits in the ready list).
constexpr int k_max_reads_per_turn = 4;

int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The kernel receive time (CLOCK_REALTIME ns) in a recvmsg's control data; 0 when absent.
int64_t kernel_receive_time(msghdr& msg) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS) continue;
    if (c->cmsg_len < CMSG_LEN(sizeof(timespec))) continue;
    timespec ts{};
    std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }
  return 0;
}

int64_t seconds_to_ns(double s) {
  if (!(s > 0)) return k_no_deadline;
  if (s > 1e9) return k_no_deadline;
  return static_cast<int64_t>(std::llround(s * 1e9));
}

int64_t add_deadline(int64_t now_ns, int64_t span_ns) {
  return span_ns == k_no_deadline ? k_no_deadline : now_ns + span_ns;
}

HttpParserLimits parser_limits(const RawOptions& options) {
  HttpParserLimits limits;
  limits.max_header_bytes = options.max_header_bytes;
  return limits;
}

class RawTransport final : public Transport {
 public:
  RawTransport(std::unique_ptr<WakeableEpoll> epoll, const RawOptions& options)
      : m_epoll(std::move(epoll)),
        m_read_interval_ns(int64_t{options.read_interval_us} * 1000),
        m_pool(parser_limits(options), options.max_idle_connections_per_host),
        m_recv_buffer(std::max<size_t>(4096, options.recv_buffer_bytes)) {}

  uint64_t start(HttpRequest request, StreamSink* sink) override {
    auto owned = std::make_unique<RawTransfer>();
    RawTransfer* t = owned.get();
    t->handle = ++m_next_handle;
    t->sink = sink;
    m_transfers.emplace(t->handle, std::move(owned));
    m_in_start = true;
    begin(*t, request);
    m_in_start = false;
    return t->handle;
  }

  void cancel(uint64_t handle) override {
    auto it = m_transfers.find(handle);
    if (it == m_transfers.end() || it->second->early_result) return;
    RawTransfer* t = it->second.get();
    if (RawConnection* c = t->conn) {
      detach(*c);
      close_connection(*c);
    }
    end_transfer(*t, {TransportOutcome::cancelled, "cancelled"});
  }

  size_t poll(int timeout_ms) override {
    const bool delivered = deliver_early_results();
    int wait_ms = timeout_ms < 0 ? 0 : timeout_ms;
    if (delivered || !m_ready.empty()) wait_ms = 0;
    if (const RawTransfer* first = m_heap.top()) {
      const int64_t left_ns = first->deadline_ns - monotonic_now_ns();
      const int64_t left_ms = left_ns <= 0 ? 0 : (left_ns + 999'999) / 1'000'000;
      wait_ms = static_cast<int>(std::min<int64_t>(wait_ms, left_ms));
    }
    wait_ms = pace_reads(wait_ms);
    const int n = epoll_wait(m_epoll->fd(), m_events, k_max_events, wait_ms);
    m_turn_start_ns = monotonic_now_ns();
    m_realtime_to_monotonic_ns = m_turn_start_ns - realtime_ns();
    m_turn_read_bytes = false;
    for (int i = 0; i < n; ++i) {
      if (m_epoll->take_wake(m_events[i])) continue;
      on_event(*static_cast<RawConnection*>(m_events[i].data.ptr), m_events[i].events);
    }
    if (!m_ready.empty()) {
      std::vector<RawConnection*> ready;
      ready.swap(m_ready);
      for (RawConnection* c : ready) {
        if (!c->in_ready) continue;  // closed meanwhile
        c->in_ready = false;
        read_available(*c, c->peer_closed);
      }
    }
    expire_deadlines(monotonic_now_ns());
    m_pool.free_closed();
    return m_transfers.size();
  }

  void wakeup() override { m_epoll->wake(); }

  [[nodiscard]] TransportCounters counters() const override { return m_counters; }

 private:
  // Sets up `t` and puts it on a pooled or a new connection.
  void begin(RawTransfer& t, const HttpRequest& request) {
    t.start_ns = monotonic_now_ns();
    t.request_deadline_ns = add_deadline(t.start_ns, seconds_to_ns(request.timeout_s));
    t.connect_timeout_ns = seconds_to_ns(request.connect_timeout_s);
    auto url = parse_http_url(request.url);
    if (!url) {
      end_transfer(t, {TransportOutcome::connect, "URL rejected: " + url.error().message});
      return;
    }
    auto wire = build_post_request(*url, request.body, request.headers);
    if (!wire) {
      end_transfer(t, {TransportOutcome::other, wire.error().message});
      return;
    }
    t.wire = std::move(*wire);
    t.endpoint = &m_pool.endpoint(url->host, url->port);
    if (!t.endpoint->resolve_error.empty()) {
      end_transfer(t, {TransportOutcome::connect, t.endpoint->resolve_error});
      return;
    }
    assign_connection(t);
  }

  // Sends `t` on the most recently used idle connection to its endpoint, or connects anew.
  void assign_connection(RawTransfer& t) {
    if (RawConnection* c = m_pool.take_idle(*t.endpoint)) {
      attach(*c, t);
      t.connected = true;
      set_deadline(t, t.request_deadline_ns);
      send_request(*c);
      return;
    }
    open_connection(t);
  }

  // Starts a connect to the next address of `t`'s endpoint; ends `t` when none is left.
  void open_connection(RawTransfer& t) {
    const RawEndpoint& e = *t.endpoint;
    while (t.next_address < e.addresses.size()) {
      const ConnectStart cs = start_connect(e.addresses[t.next_address++]);
      if (cs.fd < 0) {
        t.last_connect_errno = cs.error;
        continue;
      }
      const int one = 1;
      setsockopt(cs.fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);  // else: read times
      RawConnection& c = m_pool.adopt(cs.fd, *t.endpoint);
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
      ev.data.ptr = &c;
      if (epoll_ctl(m_epoll->fd(), EPOLL_CTL_ADD, c.fd, &ev) != 0) {
        const int error = errno;
        close_connection(c);
        end_transfer(t, {TransportOutcome::other, fmt::format("epoll: {}", std::strerror(error))});
        return;
      }
      attach(c, t);
      set_deadline(t, std::min(t.request_deadline_ns,
                               add_deadline(monotonic_now_ns(), t.connect_timeout_ns)));
      return;
    }
    end_transfer(t, {TransportOutcome::connect, fmt::format("Failed to connect to {}: {}", e.name,
                                                            std::strerror(t.last_connect_errno))});
  }

  void on_event(RawConnection& c, uint32_t events) {
    if (c.state == RawConnState::closed) return;
    if (c.state == RawConnState::idle) {
      // The server closed (or wrote to) a connection that carries no request: drop it.
      if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) close_connection(c);
      return;
    }
    if (c.state == RawConnState::connecting) {
      if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
      RawTransfer& t = *c.transfer;
      if (const int error = socket_error(c.fd); error != 0) {
        t.last_connect_errno = error;
        detach(c);
        close_connection(c);
        open_connection(t);  // the next address, if any
        return;
      }
      c.state = RawConnState::sending;
      t.connected = true;
      set_deadline(t, t.request_deadline_ns);
      send_request(c);
      if (c.state == RawConnState::closed) return;
    } else if (c.state == RawConnState::sending && (events & EPOLLOUT)) {
      send_request(c);
      if (c.state == RawConnState::closed) return;
    }
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      read_available(c, (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
    }
  }

  void send_request(RawConnection& c) {
    RawTransfer& t = *c.transfer;
    while (t.wire_sent_bytes < t.wire.size()) {
      const ssize_t n = send(c.fd, t.wire.data() + t.wire_sent_bytes,
                             t.wire.size() - t.wire_sent_bytes, MSG_NOSIGNAL);
      if (n > 0) {
        t.wire_sent_bytes += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // EPOLLOUT resumes it
      connection_broke(c, n < 0 ? errno : EPIPE, "Send failure");
      return;
    }
    c.state = RawConnState::receiving;
  }

  // Reads until the socket is drained or this turn's share is used up. A short read means
  // drained (new bytes raise a new edge), unless the peer's close was signalled with this
  // edge: then the read that sees the close must still come.
  void read_available(RawConnection& c, bool peer_closed) {
    for (int i = 0; i < k_max_reads_per_turn; ++i) {
      iovec iov{m_recv_buffer.data(), m_recv_buffer.size()};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      const ssize_t n = recvmsg(c.fd, &msg, 0);
      if (n > 0) {
        m_turn_read_bytes = true;
        if (!consume(c, static_cast<size_t>(n), arrival_time(c, msg))) return;
        if (static_cast<size_t>(n) < m_recv_buffer.size() && !peer_closed) return;
        continue;
      }
      if (n == 0) {
        on_eof(c);
        return;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      connection_broke(c, errno, "Recv failure");
      return;
    }
    c.in_ready = true;
    c.peer_closed = peer_closed;
    m_ready.push_back(&c);
  }

  // When the bytes `msg` just read reached this host, on the monotonic clock: the kernel's
  // receive time when the read carries one, kept between the transfer's start and now.
  int64_t arrival_time(const RawConnection& c, msghdr& msg) {
    ++m_counters.reads;
    const int64_t kernel_ns = kernel_receive_time(msg);
    if (kernel_ns == 0) return monotonic_now_ns();
    ++m_counters.kernel_timestamped_reads;
    const int64_t start_ns = c.transfer != nullptr ? c.transfer->start_ns : 0;
    const int64_t arrival_ns = std::max(kernel_ns + m_realtime_to_monotonic_ns, start_ns);
    // Bytes that came before this turn began need no clock read to be kept before now.
    return arrival_ns <= m_turn_start_ns ? arrival_ns : std::min(arrival_ns, monotonic_now_ns());
  }

  // Parses `n_bytes` that arrived at `arrival_ns`; false when the connection's transfer ended
  // or it closed.
  bool consume(RawConnection& c, size_t n_bytes, int64_t arrival_ns) {
    RawTransfer* t = c.transfer;
    if (t == nullptr) {
      close_connection(c);
      return false;
    }
    t->arrival_ns = arrival_ns;
    size_t used = 0;
    const std::string_view bytes(m_recv_buffer.data(), n_bytes);
    switch (c.parser.feed(bytes, *t, used)) {
      case HttpParseState::need_more:
        return true;
      case HttpParseState::complete: {
        const bool reuse = c.parser.keep_alive() && used == n_bytes &&
                           t->wire_sent_bytes == t->wire.size() &&
                           c.state == RawConnState::receiving;
        detach(c);
        if (reuse) {
          m_pool.release(c);
        } else {
          close_connection(c);
        }
        end_transfer(*t, {TransportOutcome::ok, {}, arrival_ns});
        return false;
      }
      case HttpParseState::stopped:
        detach(c);
        close_connection(c);
        end_transfer(*t, {TransportOutcome::aborted, "stopped by the client"});
        return false;
      case HttpParseState::error: {
        const auto outcome = c.parser.error_kind() == HttpParseError::bad_chunk
                                 ? TransportOutcome::reset
                                 : TransportOutcome::other;
        std::string message = "malformed HTTP response: " + c.parser.error();
        detach(c);
        close_connection(c);
        end_transfer(*t, {outcome, std::move(message)});
        return false;
      }
    }
    return false;
  }

  void on_eof(RawConnection& c) {
    RawTransfer* t = c.transfer;
    if (t == nullptr) {
      close_connection(c);
      return;
    }
    if (retry_on_fresh_connection(c)) return;
    const HttpParseState state = c.parser.finish_at_eof();
    std::string message = c.parser.error();
    detach(c);
    close_connection(c);
    if (state == HttpParseState::complete) {
      end_transfer(*t, {TransportOutcome::ok, {}, monotonic_now_ns()});
    } else {
      end_transfer(*t, {TransportOutcome::reset, std::move(message)});
    }
  }

  void connection_broke(RawConnection& c, int error, std::string_view what) {
    RawTransfer* t = c.transfer;
    if (retry_on_fresh_connection(c)) return;
    detach(c);
    close_connection(c);
    if (t != nullptr) {
      end_transfer(*t,
                   {TransportOutcome::reset, fmt::format("{}: {}", what, std::strerror(error))});
    }
  }

  // A kept-alive connection that the server had closed fails before any response byte: sends
  // the request once more on a new connection, as libcurl does. False when that does not apply.
  bool retry_on_fresh_connection(RawConnection& c) {
    RawTransfer* t = c.transfer;
    if (t == nullptr || !c.reused || c.parser.started() || t->retried) return false;
    t->retried = true;
    t->wire_sent_bytes = 0;
    t->next_address = 0;
    detach(c);
    close_connection(c);
    open_connection(*t);
    return true;
  }

  // Sleeps out the rest of the read interval when the last turn read data (so busy sockets
  // gather more per read), never longer than `wait_ms`; returns what is left of `wait_ms`.
  int pace_reads(int wait_ms) {
    if (m_read_interval_ns <= 0 || !m_turn_read_bytes || wait_ms <= 0) return wait_ms;
    const int64_t wait_ns = int64_t{wait_ms} * 1'000'000;
    const int64_t pause_ns =
        std::min(wait_ns, m_turn_start_ns + m_read_interval_ns - monotonic_now_ns());
    if (pause_ns <= 0) return wait_ms;
    const timespec pause{static_cast<time_t>(pause_ns / 1'000'000'000),
                         static_cast<long>(pause_ns % 1'000'000'000)};
    nanosleep(&pause, nullptr);
    return static_cast<int>((wait_ns - pause_ns) / 1'000'000);
  }

  void expire_deadlines(int64_t now_ns) {
    while (RawTransfer* t = m_heap.top()) {
      if (t->deadline_ns > now_ns) break;
      const double elapsed_ms = static_cast<double>(now_ns - t->start_ns) / 1e6;
      TransportResult result;
      if (!t->connected) {
        result = {TransportOutcome::connect,
                  fmt::format("Connection timed out after {:.0f} ms", elapsed_ms)};
      } else {
        const uint64_t received = t->conn != nullptr ? t->conn->parser.body_bytes() : 0;
        result = {TransportOutcome::timeout,
                  fmt::format("Operation timed out after {:.0f} ms with {} bytes received",
                              elapsed_ms, received)};
      }
      if (RawConnection* c = t->conn) {
        detach(*c);
        close_connection(*c);
      }
      end_transfer(*t, std::move(result));
    }
  }

  void set_deadline(RawTransfer& t, int64_t deadline_ns) {
    if (deadline_ns == k_no_deadline) {
      m_heap.remove(&t);
    } else {
      m_heap.set(&t, deadline_ns);
    }
  }

  static void attach(RawConnection& c, RawTransfer& t) {
    c.transfer = &t;
    t.conn = &c;
  }

  static void detach(RawConnection& c) {
    if (c.transfer != nullptr) c.transfer->conn = nullptr;
    c.transfer = nullptr;
  }

  // Closes `c`; the object lives until the end of poll(), after every event that may name it.
  void close_connection(RawConnection& c) {
    if (c.in_ready) {
      c.in_ready = false;
      std::erase(m_ready, &c);
    }
    m_pool.close(c);
  }

  // Reports the end of `t` to its sink and forgets it; inside start() the report waits for
  // the next poll(), so a sink never hears of its transfer before start() returned.
  void end_transfer(RawTransfer& t, TransportResult result) {
    m_heap.remove(&t);
    if (m_in_start) {
      t.early_result = std::move(result);
      m_early.push_back(t.handle);
      return;
    }
    StreamSink* sink = t.sink;
    m_transfers.erase(t.handle);
    sink->on_done(result);
  }

  bool deliver_early_results() {
    if (m_early.empty()) return false;
    std::deque<uint64_t> early;
    early.swap(m_early);
    for (const uint64_t handle : early) {
      auto it = m_transfers.find(handle);
      if (it == m_transfers.end()) continue;
      StreamSink* sink = it->second->sink;
      const TransportResult result = std::move(*it->second->early_result);
      m_transfers.erase(it);
      sink->on_done(result);
    }
    return true;
  }

  std::unique_ptr<WakeableEpoll> m_epoll;
  int64_t m_read_interval_ns;
  int64_t m_turn_start_ns = 0;             // when the last epoll_wait returned
  int64_t m_realtime_to_monotonic_ns = 0;  // taken then
  bool m_turn_read_bytes = false;          // the last turn read data
  TransportCounters m_counters;
  RawConnectionPool m_pool;
  std::vector<char> m_recv_buffer;
  epoll_event m_events[k_max_events];
  bool m_in_start = false;
  uint64_t m_next_handle = 0;
  std::unordered_map<uint64_t, std::unique_ptr<RawTransfer>> m_transfers;
  std::vector<RawConnection*> m_ready;
  std::deque<uint64_t> m_early;
  DeadlineHeap<RawTransfer> m_heap;
};

}  // namespace

std::unique_ptr<Transport> make_raw_transport(const RawOptions& options) {
  auto epoll = WakeableEpoll::create();
  if (!epoll) return nullptr;
  return std::make_unique<RawTransport>(std::move(epoll), options);
}

}  // namespace kvprof::client
