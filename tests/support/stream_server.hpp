// A tiny loopback OpenAI-style streaming server for tests and benchmarks (header-only, Boost.Asio
// coroutines): answers POST /v1/completions and /v1/chat/completions with one SSE event per
// token over chunked HTTP/1.1 with keep-alive, and can inject faults per request.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace kvprof::testing {

enum class Fault {
  none,
  http_500,
  http_429,
  http_400,
  reset_mid_stream,  // a few tokens, then a TCP reset
  close_mid_stream,  // a few tokens, then a clean close without the chunked terminator
  malformed_sse,     // a few tokens, then an event that is not JSON
  error_payload,     // a few tokens, then data: {"error": {...}}
  stall,             // headers, one token, then nothing for stall_ms
  no_done,           // all tokens, usage, but no [DONE] before the stream ends
};

struct StreamServerOptions {
  uint32_t tokens = 0;  // tokens per response; 0 = the request's max_tokens
  uint32_t first_token_delay_us = 0;
  uint32_t token_delay_us = 0;    // between tokens
  uint32_t events_per_write = 1;  // events sent in one socket write (the benchmark batches)
  uint32_t fault_after_tokens = 2;
  uint32_t stall_ms = 5000;
  std::function<Fault(uint64_t request_index)> fault;  // null: no faults
  size_t threads = 1;
  size_t max_kept_bodies = 64;  // request bodies kept for inspection
};

class StreamServer {
 public:
  explicit StreamServer(StreamServerOptions options)
      : m_options(std::move(options)),
        m_acceptor(m_io, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    m_port = m_acceptor.local_endpoint().port();
    boost::asio::co_spawn(m_io, accept_loop(), boost::asio::detached);
    for (size_t i = 0; i < std::max<size_t>(1, m_options.threads); ++i) {
      m_threads.emplace_back([this] { m_io.run(); });
    }
  }
  ~StreamServer() { stop(); }
  StreamServer(const StreamServer&) = delete;
  StreamServer& operator=(const StreamServer&) = delete;

  void stop() {
    m_io.stop();
    for (auto& t : m_threads) {
      if (t.joinable()) t.join();
    }
  }

  uint16_t port() const { return m_port; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(m_port); }
  uint64_t requests_seen() const { return m_requests.load(); }
  uint64_t connections_seen() const { return m_connections.load(); }
  std::vector<std::string> bodies() const {
    std::lock_guard lock(m_mutex);
    return m_bodies;
  }

 private:
  using tcp = boost::asio::ip::tcp;
  template <class T>
  using awaitable = boost::asio::awaitable<T>;

  awaitable<void> accept_loop() {
    for (;;) {
      tcp::socket socket = co_await m_acceptor.async_accept(boost::asio::use_awaitable);
      socket.set_option(tcp::no_delay(true));
      ++m_connections;
      boost::asio::co_spawn(m_acceptor.get_executor(), session(std::move(socket)),
                            boost::asio::detached);
    }
  }

  static std::string chunk(std::string_view payload) {
    char size_hex[32];
    const int n = std::snprintf(size_hex, sizeof size_hex, "%zx\r\n", payload.size());
    std::string out(size_hex, static_cast<size_t>(n));
    out.append(payload);
    out.append("\r\n");
    return out;
  }

  static std::string token_event(bool chat, uint32_t i, uint32_t n) {
    const char* finish = i + 1 == n ? "\"length\"" : "null";
    if (chat) {
      return "data: {\"id\":\"chatcmpl-kvprof\",\"object\":\"chat.completion.chunk\",\"created\":0,"
             "\"model\":\"fake\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok" +
             std::to_string(i) + "\"},\"logprobs\":null,\"finish_reason\":" + finish + "}]}\n\n";
    }
    return "data: {\"id\":\"cmpl-kvprof\",\"object\":\"text_completion\",\"created\":0,"
           "\"model\":\"fake\",\"choices\":[{\"index\":0,\"text\":\" tok" +
           std::to_string(i) + "\",\"logprobs\":null,\"finish_reason\":" + finish +
           ",\"stop_reason\":null}],\"usage\":null}\n\n";
  }

  awaitable<void> pause_us(uint32_t us) {
    if (us == 0) co_return;
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor);
    timer.expires_after(std::chrono::microseconds(us));
    co_await timer.async_wait(boost::asio::use_awaitable);
  }

  awaitable<void> write(tcp::socket& socket, const std::string& bytes) {
    co_await boost::asio::async_write(socket, boost::asio::buffer(bytes),
                                      boost::asio::use_awaitable);
  }

  awaitable<void> send_plain(tcp::socket& socket, int status, const char* reason,
                             const std::string& body) {
    co_await write(socket, "HTTP/1.1 " + std::to_string(status) + " " + reason +
                               "\r\nContent-Type: application/json\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\n\r\n" + body);
  }

  awaitable<void> session(tcp::socket socket) {
    try {
      std::string buf;
      for (;;) {
        const size_t header_end = co_await boost::asio::async_read_until(
            socket, boost::asio::dynamic_buffer(buf), "\r\n\r\n", boost::asio::use_awaitable);
        const std::string head = buf.substr(0, header_end);
        size_t content_length = 0;
        for (const char* key : {"Content-Length:", "content-length:"}) {
          if (auto p = head.find(key); p != std::string::npos) {
            content_length = std::strtoull(head.c_str() + p + std::strlen(key), nullptr, 10);
          }
        }
        if (buf.size() < header_end + content_length) {
          co_await boost::asio::async_read(
              socket, boost::asio::dynamic_buffer(buf),
              boost::asio::transfer_exactly(header_end + content_length - buf.size()),
              boost::asio::use_awaitable);
        }
        std::string body = buf.substr(header_end, content_length);
        buf.erase(0, header_end + content_length);
        const bool chat = head.find("/chat/completions") != std::string::npos;
        const uint64_t index = m_requests++;
        {
          std::lock_guard lock(m_mutex);
          if (m_bodies.size() < m_options.max_kept_bodies) m_bodies.push_back(body);
        }
        const bool keep_open = co_await respond(socket, body, chat, index);
        if (!keep_open) co_return;
      }
    } catch (const std::exception&) {
      // The client went away: nothing to do.
    }
  }

  // Streams one response; false when the connection must close.
  awaitable<bool> respond(tcp::socket& socket, const std::string& body, bool chat, uint64_t index) {
    const Fault fault = m_options.fault ? m_options.fault(index) : Fault::none;
    if (fault == Fault::http_500) {
      co_await send_plain(
          socket, 500, "Internal Server Error",
          R"({"error":{"message":"engine crashed","type":"InternalError","code":500}})");
      co_return true;
    }
    if (fault == Fault::http_429) {
      co_await send_plain(socket, 429, "Too Many Requests",
                          R"({"error":{"message":"too many requests","code":429}})");
      co_return true;
    }
    uint32_t n_tokens = m_options.tokens;
    uint64_t prompt_tokens = 0;
    auto doc = nlohmann::json::parse(body, nullptr, false);
    if (!doc.is_discarded() && doc.is_object()) {
      if (n_tokens == 0 && doc.contains("max_tokens") && doc["max_tokens"].is_number_unsigned()) {
        n_tokens = doc["max_tokens"].get<uint32_t>();
      }
      if (doc.contains("prompt") && doc["prompt"].is_array()) prompt_tokens = doc["prompt"].size();
    }
    if (fault == Fault::http_400 || doc.is_discarded()) {
      co_await send_plain(socket, 400, "Bad Request",
                          R"({"error":{"message":"bad request","code":400}})");
      co_return true;
    }
    if (n_tokens == 0) n_tokens = 16;
    co_await write(socket,
                   "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: "
                   "no-cache\r\nTransfer-Encoding: chunked\r\n\r\n");
    co_await pause_us(m_options.first_token_delay_us);
    std::string pending;
    uint32_t pending_events = 0;
    for (uint32_t i = 0; i < n_tokens; ++i) {
      const bool faulting = fault != Fault::none && fault != Fault::no_done &&
                            i >= std::min(m_options.fault_after_tokens, n_tokens - 1);
      if (faulting) {
        if (!pending.empty()) co_await write(socket, pending);
        co_await inject(socket, fault, chat, i, n_tokens);
        co_return false;
      }
      pending += chunk(token_event(chat, i, n_tokens));
      if (++pending_events >= m_options.events_per_write || m_options.token_delay_us > 0) {
        co_await write(socket, pending);
        pending.clear();
        pending_events = 0;
      }
      if (i + 1 < n_tokens) co_await pause_us(m_options.token_delay_us);
    }
    const std::string usage =
        "data: {\"id\":\"cmpl-kvprof\",\"choices\":[],\"usage\":{"
        "\"prompt_tokens\":" +
        std::to_string(prompt_tokens) + ",\"completion_tokens\":" + std::to_string(n_tokens) +
        ",\"total_tokens\":" + std::to_string(prompt_tokens + n_tokens) + "}}\n\n";
    pending += chunk(usage);
    if (fault != Fault::no_done) pending += chunk("data: [DONE]\n\n");
    pending += "0\r\n\r\n";
    co_await write(socket, pending);
    co_return true;
  }

  awaitable<void> inject(tcp::socket& socket, Fault fault, bool chat, uint32_t i, uint32_t n) {
    switch (fault) {
      case Fault::reset_mid_stream:
        socket.set_option(boost::asio::socket_base::linger(true, 0));
        socket.close();
        co_return;
      case Fault::close_mid_stream:
        socket.shutdown(tcp::socket::shutdown_both);
        socket.close();
        co_return;
      case Fault::malformed_sse:
        co_await write(socket, chunk("data: {\"choices\": [ this is not json\n\n") + "0\r\n\r\n");
        co_return;
      case Fault::error_payload:
        co_await write(socket, chunk("data: {\"error\": {\"message\": \"out of KV cache blocks\", "
                                     "\"type\": \"InternalServerError\", \"code\": 500}}\n\n") +
                                   chunk("data: [DONE]\n\n") + "0\r\n\r\n");
        co_return;
      case Fault::stall:
        co_await write(socket, chunk(token_event(chat, i, n)));
        co_await pause_us(m_options.stall_ms * 1000);
        socket.close();
        co_return;
      default:
        co_return;
    }
  }

  StreamServerOptions m_options;
  boost::asio::io_context m_io;
  tcp::acceptor m_acceptor;
  uint16_t m_port = 0;
  std::vector<std::thread> m_threads;
  std::atomic<uint64_t> m_requests{0};
  std::atomic<uint64_t> m_connections{0};
  mutable std::mutex m_mutex;
  std::vector<std::string> m_bodies;
};

}  // namespace kvprof::testing
