// Private to server_http.cpp and server_generate.cpp: the state behind Server (Asio/Beast types
// stay out of the public header).
#pragma once

#include "kvprof/serve/http_io.hpp"  // first: it includes <utility> before Asio

#include <atomic>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "kvprof/serve/server.hpp"

namespace kvprof::serve {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

// Engine events of one request, delivered on the io thread; `signal` wakes the session.
struct Channel {
  explicit Channel(const asio::any_io_executor& ex) : signal(ex) {}
  asio::steady_timer signal;
  std::deque<GenerateEvent> events;
};

class Server::Impl {
 public:
  std::shared_ptr<Backend> backend;
  ServerOptions options;
  std::string server_headers;  // the backend's, cached
  // Shared with the sinks the engine thread calls, which may outlive this Impl.
  std::shared_ptr<asio::io_context> ioc = std::make_shared<asio::io_context>(1);
  tcp::acceptor acceptor{*ioc};
  uint16_t port = 0;
  std::thread io_thread;
  std::atomic<bool> stopped{false};
  std::atomic<uint64_t> http_requests{0};
  std::atomic<uint64_t> completions{0};
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> aborted{0};
  std::atomic<uint64_t> faults{0};
  // Response ids are "chatcmpl-"/"cmpl-" + this server's random tag + the request number, so
  // ids of two servers (or two runs) do not repeat.
  std::string id_tag;

  Expected<void> bind();
  asio::awaitable<void> listen();
  asio::awaitable<void> session(tcp::socket socket);

  // A whole answer: status line, headers, body; counts 4xx answers.
  std::string reply(int status, ContentType type, const std::string& body, bool keep_alive,
                    std::string_view extra_headers = {});
  // `reply` as it is: the backend's answer.
  std::string reply(const HttpReply& answer, bool keep_alive) {
    return reply(answer.status, answer.content_type, answer.body, keep_alive);
  }
  // The backend's error body for `status` as a whole answer.
  std::string error_reply(int status, std::string_view message, bool keep_alive,
                          std::string_view extra_headers = {});
  // The status line and headers of a streamed (chunked) answer.
  std::string stream_head(bool keep_alive) const;

  // server_generate.cpp: serves one generation request; false when the connection must close.
  asio::awaitable<bool> handle_generate(tcp::socket& socket, const std::string& body,
                                        Endpoint endpoint, bool keep_alive,
                                        std::string_view fault_header);

 private:
  std::string tokenize_reply(const std::string& body, bool detokenize, bool keep_alive);
  std::string apply_template_reply(const std::string& body, bool keep_alive);
};

}  // namespace kvprof::serve
