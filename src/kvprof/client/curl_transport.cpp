// The libcurl multi-interface Transport: all transfers of one thread share one CURLM, which
// keeps HTTP/1.1 connections alive between requests. The event loop is epoll driving
// curl_multi_socket_action, so a wakeup costs O(ready sockets), not O(open streams) as
// curl_multi_poll's would with thousands of streams.
#include <curl/curl.h>
#include <fmt/format.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "kvprof/client/transport.hpp"
#include "kvprof/client/wakeable_epoll.hpp"

namespace kvprof::client {

namespace {

struct Transfer {
  uint64_t handle = 0;
  CURL* easy = nullptr;
  StreamSink* sink = nullptr;
  TransportCounters* counters = nullptr;  // the transport's
  HttpRequest request;
  curl_slist* headers = nullptr;
  bool status_sent = false;
  bool aborted = false;
  char error_buffer[CURL_ERROR_SIZE] = {};
};

void report_status(Transfer& t) {
  if (t.status_sent) return;
  long status = 0;
  curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
  if (status == 0) return;
  t.status_sent = true;
  t.sink->on_status(static_cast<int>(status));
}

size_t write_callback(char* ptr, size_t size, size_t nmemb, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  const size_t n_bytes = size * nmemb;
  report_status(*t);
  ++t->counters->reads;
  if (!t->sink->on_data(std::string_view(ptr, n_bytes), monotonic_now_ns())) {
    t->aborted = true;
    return 0;  // makes libcurl end the transfer with CURLE_WRITE_ERROR
  }
  return n_bytes;
}

// The proxy exclusion list: the user's no_proxy plus loopback, so a proxy set in the
// environment never intercepts a local server.
std::string no_proxy_list() {
  std::string list = "localhost,127.0.0.1,::1";
  for (const char* name : {"no_proxy", "NO_PROXY"}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
      list += ',';
      list += v;
      break;
    }
  }
  return list;
}

class CurlTransport final : public Transport {
 public:
  CurlTransport(CURLM* multi, std::unique_ptr<WakeableEpoll> epoll, const CurlOptions& options)
      : m_multi(multi), m_epoll(std::move(epoll)), m_no_proxy(no_proxy_list()) {
    if (options.max_connections > 0) {
      curl_multi_setopt(m_multi, CURLMOPT_MAXCONNECTS, static_cast<long>(options.max_connections));
    }
    curl_multi_setopt(m_multi, CURLMOPT_SOCKETFUNCTION, &CurlTransport::socket_callback);
    curl_multi_setopt(m_multi, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(m_multi, CURLMOPT_TIMERFUNCTION, &CurlTransport::timer_callback);
    curl_multi_setopt(m_multi, CURLMOPT_TIMERDATA, this);
  }

  ~CurlTransport() override {
    for (auto& [handle, t] : m_transfers) {
      curl_multi_remove_handle(m_multi, t->easy);
      curl_easy_cleanup(t->easy);
      curl_slist_free_all(t->headers);
    }
    for (CURL* easy : m_free_easy)
      curl_easy_cleanup(easy);
    curl_multi_cleanup(m_multi);
  }

  uint64_t start(HttpRequest request, StreamSink* sink) override {
    auto t = std::make_unique<Transfer>();
    t->handle = ++m_next_handle;
    t->sink = sink;
    t->request = std::move(request);
    if (!m_free_easy.empty()) {
      t->easy = m_free_easy.back();
      m_free_easy.pop_back();
      curl_easy_reset(t->easy);
    } else {
      t->easy = curl_easy_init();
    }
    if (t->easy == nullptr) {
      m_failed_starts.push_back({sink, "libcurl could not create a transfer"});
      return t->handle;
    }
    configure(*t);
    // With every cached connection busy, a new transfer needs a new connection anyway; saying so
    // spares libcurl a walk over all connections to the host, which made each start cost O(open
    // streams) with thousands of them.
    if (m_transfers.size() >= m_max_transfers) {
      curl_easy_setopt(t->easy, CURLOPT_FRESH_CONNECT, 1L);
    }
    if (curl_multi_add_handle(m_multi, t->easy) != CURLM_OK) {
      m_failed_starts.push_back({sink, "libcurl could not start a transfer"});
      recycle(*t);
      return t->handle;
    }
    const uint64_t handle = t->handle;
    m_transfers.emplace(handle, std::move(t));
    m_max_transfers = std::max(m_max_transfers, m_transfers.size());
    return handle;
  }

  void cancel(uint64_t handle) override {
    auto it = m_transfers.find(handle);
    if (it == m_transfers.end()) return;
    std::unique_ptr<Transfer> t = std::move(it->second);
    m_transfers.erase(it);
    curl_multi_remove_handle(m_multi, t->easy);
    StreamSink* sink = t->sink;
    recycle(*t);
    sink->on_done({TransportOutcome::cancelled, "cancelled"});
  }

  size_t poll(int timeout_ms) override {
    deliver_failed_starts();
    int running = 0;
    if (m_timer_due) {  // transfers added since the last poll start on curl's timer
      m_timer_due = false;
      curl_multi_socket_action(m_multi, CURL_SOCKET_TIMEOUT, 0, &running);
      if (collect_done()) return m_transfers.size();
    }
    int wait_ms = timeout_ms < 0 ? 0 : timeout_ms;
    if (m_timer_armed) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            m_timer_deadline - std::chrono::steady_clock::now())
                            .count();
      wait_ms = std::clamp<int>(static_cast<int>(left) + 1, 0, wait_ms);
    }
    constexpr int k_max_events = 256;
    epoll_event events[k_max_events];
    const int n = epoll_wait(m_epoll->fd(), events, k_max_events, wait_ms);
    for (int i = 0; i < n; ++i) {
      if (m_epoll->take_wake(events[i])) continue;
      const int fd = events[i].data.fd;
      int flags = 0;
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)) flags |= CURL_CSELECT_IN;
      if (events[i].events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
      if (events[i].events & EPOLLERR) flags |= CURL_CSELECT_ERR;
      curl_multi_socket_action(m_multi, fd, flags, &running);
    }
    if (m_timer_due || (m_timer_armed && std::chrono::steady_clock::now() >= m_timer_deadline)) {
      m_timer_due = false;
      m_timer_armed = false;
      curl_multi_socket_action(m_multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    collect_done();
    return m_transfers.size();
  }

  void wakeup() override { m_epoll->wake(); }

  [[nodiscard]] TransportCounters counters() const override { return m_counters; }

 private:
  // libcurl tells which sockets to watch for what; mirror that in the epoll set.
  static int socket_callback(CURL*, curl_socket_t fd, int what, void* self_ptr, void*) {
    auto* self = static_cast<CurlTransport*>(self_ptr);
    if (what == CURL_POLL_REMOVE) {
      epoll_ctl(self->m_epoll->fd(), EPOLL_CTL_DEL, fd, nullptr);
      return 0;
    }
    epoll_event ev{};
    ev.data.fd = fd;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) ev.events |= EPOLLIN;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) ev.events |= EPOLLOUT;
    if (epoll_ctl(self->m_epoll->fd(), EPOLL_CTL_MOD, fd, &ev) != 0) {
      epoll_ctl(self->m_epoll->fd(), EPOLL_CTL_ADD, fd, &ev);
    }
    return 0;
  }

  // libcurl asks to be called back after `timeout_ms` (-1: no timer, 0: as soon as possible).
  static int timer_callback(CURLM*, long timeout_ms, void* self_ptr) {
    auto* self = static_cast<CurlTransport*>(self_ptr);
    self->m_timer_armed = timeout_ms > 0;
    self->m_timer_due = timeout_ms == 0;
    if (timeout_ms > 0) {
      self->m_timer_deadline =
          std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    }
    return 0;
  }

  struct FailedStart {
    StreamSink* sink;
    std::string message;
  };

  void configure(Transfer& t) {
    CURL* e = t.easy;
    curl_easy_setopt(e, CURLOPT_URL, t.request.url.c_str());
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, t.request.body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(t.request.body.size()));
    t.headers = curl_slist_append(t.headers, "Content-Type: application/json");
    t.headers = curl_slist_append(t.headers, "Accept: text/event-stream");
    t.headers = curl_slist_append(t.headers, "Expect:");  // no 100-continue round trip
    for (const auto& h : t.request.headers)
      t.headers = curl_slist_append(t.headers, h.c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, t.headers);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_NOPROXY, m_no_proxy.c_str());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &write_callback);
    t.counters = &m_counters;
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(e, CURLOPT_PRIVATE, &t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t.error_buffer);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(t.request.timeout_s * 1000.0));
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(t.request.connect_timeout_s * 1000.0));
  }

  void recycle(Transfer& t) {
    curl_slist_free_all(t.headers);
    t.headers = nullptr;
    if (t.easy != nullptr) m_free_easy.push_back(t.easy);
    t.easy = nullptr;
  }

  void deliver_failed_starts() {
    while (!m_failed_starts.empty()) {
      FailedStart f = std::move(m_failed_starts.front());
      m_failed_starts.pop_front();
      f.sink->on_done({TransportOutcome::other, f.message});
    }
  }

  // Ends every finished transfer; true when there was one.
  bool collect_done() {
    bool any = false;
    int n_left = 0;
    while (CURLMsg* msg = curl_multi_info_read(m_multi, &n_left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Transfer* raw = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &raw);
      const CURLcode code = msg->data.result;
      curl_multi_remove_handle(m_multi, msg->easy_handle);
      if (raw == nullptr) continue;
      auto it = m_transfers.find(raw->handle);
      if (it == m_transfers.end()) continue;
      std::unique_ptr<Transfer> t = std::move(it->second);
      m_transfers.erase(it);
      report_status(*t);
      const TransportResult result = classify(*t, code);
      StreamSink* sink = t->sink;
      recycle(*t);
      sink->on_done(result);
      any = true;
    }
    return any;
  }

  static TransportResult classify(const Transfer& t, CURLcode code) {
    if (code == CURLE_OK) return {TransportOutcome::ok, {}};
    const std::string detail = t.error_buffer[0] != '\0' ? std::string(t.error_buffer)
                                                         : std::string(curl_easy_strerror(code));
    // Connected (new or reused connection) when the request got as far as being sent; the
    // connect time alone is 0 on a reused keep-alive connection.
    const auto request_sent = [&] {
      curl_off_t pretransfer_us = 0;
      curl_easy_getinfo(t.easy, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
      return pretransfer_us > 0;
    };
    switch (code) {
      case CURLE_COULDNT_CONNECT:
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_COULDNT_RESOLVE_PROXY:
      case CURLE_URL_MALFORMAT:
        return {TransportOutcome::connect, detail};
      case CURLE_UNSUPPORTED_PROTOCOL:
        // An unknown URL scheme, or (once sent) a reply libcurl takes for HTTP/0.9: a malformed
        // status line, which the raw transport files under other too.
        return {request_sent() ? TransportOutcome::other : TransportOutcome::connect, detail};
      case CURLE_OPERATION_TIMEDOUT:
        return {request_sent() ? TransportOutcome::timeout : TransportOutcome::connect, detail};
      case CURLE_WRITE_ERROR:
        if (t.aborted) return {TransportOutcome::aborted, "stopped by the client"};
        return {TransportOutcome::other, detail};
      case CURLE_RECV_ERROR:
      case CURLE_SEND_ERROR:
      case CURLE_PARTIAL_FILE:
      case CURLE_GOT_NOTHING:
      case CURLE_HTTP2:
      case CURLE_HTTP2_STREAM:
        return {TransportOutcome::reset, detail};
      default:
        return {TransportOutcome::other, detail};
    }
  }

  CURLM* m_multi;
  TransportCounters m_counters;
  std::unique_ptr<WakeableEpoll> m_epoll;
  // libcurl's single timer: due now, or armed for a deadline.
  bool m_timer_due = false;
  bool m_timer_armed = false;
  std::chrono::steady_clock::time_point m_timer_deadline;
  std::string m_no_proxy;
  uint64_t m_next_handle = 0;
  size_t m_max_transfers = 0;  // the most transfers open at once (an upper bound on connections)
  std::unordered_map<uint64_t, std::unique_ptr<Transfer>> m_transfers;
  std::vector<CURL*> m_free_easy;
  std::deque<FailedStart> m_failed_starts;
};

}  // namespace

std::unique_ptr<Transport> make_curl_transport(const CurlOptions& options) {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] { ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; });
  if (!ok) return nullptr;
  auto epoll = WakeableEpoll::create();
  CURLM* multi = curl_multi_init();
  if (multi == nullptr || !epoll) {
    if (multi != nullptr) curl_multi_cleanup(multi);
    return nullptr;
  }
  return std::make_unique<CurlTransport>(multi, std::move(epoll), options);
}

}  // namespace kvprof::client
