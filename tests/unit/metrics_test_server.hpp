// A tiny loopback HTTP/1.1 server for tests (Boost.Asio, one thread): answers each GET with what
// a handler returns for the path, optionally after a delay, then closes the connection.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include <boost/asio.hpp>

namespace kvprof::testing {

struct TestReply {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; version=0.0.4; charset=utf-8";
  int delay_ms = 0;  // wait this long before answering
};

class LoopbackHttpServer {
 public:
  using Handler = std::function<TestReply(const std::string& path)>;

  explicit LoopbackHttpServer(Handler handler)
      : m_handler(std::move(handler)),
        m_acceptor(m_io, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    m_port = m_acceptor.local_endpoint().port();
    accept();
    m_thread = std::thread([this] { m_io.run(); });
  }

  ~LoopbackHttpServer() {
    m_io.stop();
    if (m_thread.joinable()) m_thread.join();
  }

  LoopbackHttpServer(const LoopbackHttpServer&) = delete;
  LoopbackHttpServer& operator=(const LoopbackHttpServer&) = delete;

  [[nodiscard]] uint16_t port() const { return m_port; }
  [[nodiscard]] std::string url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(m_port) + std::string(path);
  }
  [[nodiscard]] size_t n_requests() const { return m_n_requests.load(); }

 private:
  struct Session : std::enable_shared_from_this<Session> {
    Session(boost::asio::ip::tcp::socket s, LoopbackHttpServer& server)
        : socket(std::move(s)), timer(socket.get_executor()), owner(server) {}

    void start() {
      auto self = shared_from_this();
      boost::asio::async_read_until(socket, buffer, "\r\n\r\n",
                                    [self](boost::system::error_code ec, size_t) {
                                      if (!ec) self->on_request();
                                    });
    }

    void on_request() {
      std::istream in(&buffer);
      std::string method;
      std::string path;
      in >> method >> path;
      ++owner.m_n_requests;
      reply = owner.m_handler(path);
      auto self = shared_from_this();
      timer.expires_after(std::chrono::milliseconds(reply.delay_ms));
      timer.async_wait([self](boost::system::error_code ec) {
        if (!ec) self->write();
      });
    }

    void write() {
      text = "HTTP/1.1 " + std::to_string(reply.status) +
             " X\r\nContent-Type: " + reply.content_type +
             "\r\nContent-Length: " + std::to_string(reply.body.size()) +
             "\r\nConnection: close\r\n\r\n" + reply.body;
      auto self = shared_from_this();
      boost::asio::async_write(
          socket, boost::asio::buffer(text), [self](boost::system::error_code, size_t) {
            boost::system::error_code ignored;
            self->socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ignored);
            self->socket.close(ignored);
          });
    }

    boost::asio::ip::tcp::socket socket;
    boost::asio::steady_timer timer;
    boost::asio::streambuf buffer;
    LoopbackHttpServer& owner;
    TestReply reply;
    std::string text;
  };

  void accept() {
    m_acceptor.async_accept([this](boost::system::error_code ec, boost::asio::ip::tcp::socket s) {
      if (ec) return;
      std::make_shared<Session>(std::move(s), *this)->start();
      accept();
    });
  }

  Handler m_handler;
  boost::asio::io_context m_io;
  boost::asio::ip::tcp::acceptor m_acceptor;
  uint16_t m_port = 0;
  std::atomic<size_t> m_n_requests{0};
  std::thread m_thread;
};

// A loopback port that nothing listens on (bound once, then released).
inline uint16_t unused_loopback_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const uint16_t port = acceptor.local_endpoint().port();
  acceptor.close();
  return port;
}

}  // namespace kvprof::testing
