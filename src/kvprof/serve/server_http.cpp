// Server: its lifecycle, accepting connections, reading HTTP/1.1 requests (keep-alive) and
// routing them; generation requests go to server_generate.cpp.

// GCC 12 at -O2 reports a false "mismatched new/delete" when it inlines Asio 1.74's coroutine
// frame allocator (operator new falls back to ::operator new, the paired delete is the frame's
// own).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "kvprof/serve/server_impl.hpp"  // first: it includes <utility> before Asio

#include <fmt/format.h>

#include <algorithm>

#include <boost/asio/redirect_error.hpp>
#include <nlohmann/json.hpp>
#include <random>

#include "kvprof/serve/request.hpp"

namespace kvprof::serve {

using asio::redirect_error;
using asio::use_awaitable;
using boost::system::error_code;
using http_io::write_all;
using nlohmann::ordered_json;

namespace {

constexpr uint64_t k_max_body_bytes = 8ULL << 20;
constexpr uint32_t k_max_header_bytes = 64U << 10;

}  // namespace

Expected<void> Server::Impl::bind() {
  std::string host = options.host;
  if (host == "localhost") host = "127.0.0.1";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) return fail(ErrorKind::usage, fmt::format("--host: not an address: '{}'", options.host));
  const tcp::endpoint endpoint(address, options.port);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return fail(ErrorKind::network, fmt::format("cannot listen on {}:{}: {}", options.host,
                                                options.port, ec.message()));
  }
  port = acceptor.local_endpoint(ec).port();
  return {};
}

asio::awaitable<void> Server::Impl::listen() {
  for (;;) {
    error_code ec;
    tcp::socket socket = co_await acceptor.async_accept(redirect_error(use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) continue;  // e.g. too many open files: keep serving the others
    socket.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(*ioc, session(std::move(socket)), asio::detached);
  }
}

std::string Server::Impl::reply(int status, ContentType type, const std::string& body,
                                bool keep_alive, std::string_view extra_headers) {
  if (status >= 400 && status < 500) ++rejected;
  return http_io::response_head(status, server_headers, backend->content_type(type),
                                static_cast<int64_t>(body.size()), keep_alive, extra_headers) +
         body;
}

std::string Server::Impl::error_reply(int status, std::string_view message, bool keep_alive,
                                      std::string_view extra_headers) {
  return reply(status, ContentType::json, backend->error_body(status, message), keep_alive,
               extra_headers);
}

std::string Server::Impl::stream_head(bool keep_alive) const {
  return http_io::response_head(200, server_headers,
                                backend->content_type(ContentType::event_stream), -1, keep_alive);
}

// /tokenize and /detokenize, as llama-server: {"content": "..."} -> {"tokens": [...]} and back.
std::string Server::Impl::tokenize_reply(const std::string& body, bool detokenize,
                                         bool keep_alive) {
  const auto doc = nlohmann::json::parse(body, nullptr, false);
  if (detokenize) {
    if (!doc.is_object() || !doc.contains("tokens") || !doc["tokens"].is_array()) {
      return error_reply(400, "expected {\"tokens\": [...]}", keep_alive);
    }
    std::vector<int32_t> tokens;
    for (const auto& t : doc["tokens"]) {
      if (!t.is_number_integer()) return error_reply(400, "tokens must be integers", keep_alive);
      tokens.push_back(t.get<int32_t>());
    }
    return reply(200, ContentType::json,
                 ordered_json{{"content", backend->detokenize(tokens)}}.dump(), keep_alive);
  }
  if (!doc.is_object() || !doc.contains("content") || !doc["content"].is_string()) {
    return error_reply(400, "expected {\"content\": \"...\"}", keep_alive);
  }
  const bool add_special = doc.contains("add_special") && doc["add_special"].is_boolean() &&
                           doc["add_special"].get<bool>();
  auto tokens = backend->tokenize(doc["content"].get<std::string>(), add_special);
  if (!tokens) return error_reply(400, tokens.error().message, keep_alive);
  return reply(200, ContentType::json, ordered_json{{"tokens", *tokens}}.dump(), keep_alive);
}

// /apply-template, as llama-server: {"messages": [...]} -> {"prompt": the formatted chat}.
std::string Server::Impl::apply_template_reply(const std::string& body, bool keep_alive) {
  const auto doc = nlohmann::json::parse(body, nullptr, false);
  if (!doc.is_object() || !doc.contains("messages")) {
    return error_reply(400, "'messages' is required", keep_alive);
  }
  auto messages = chat_messages(doc["messages"]);
  if (!messages) return error_reply(400, messages.error().message, keep_alive);
  auto prompt = backend->chat_prompt(*messages);
  if (!prompt) return error_reply(400, prompt.error().message, keep_alive);
  return reply(200, ContentType::json, ordered_json{{"prompt", *prompt}}.dump(), keep_alive);
}

asio::awaitable<void> Server::Impl::session(tcp::socket socket) {
  boost::beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(k_max_body_bytes);
    parser.header_limit(k_max_header_bytes);
    error_code ec;
    co_await http::async_read(socket, buffer, parser, redirect_error(use_awaitable, ec));
    if (ec) {
      if (ec == http::error::body_limit) {
        co_await write_all(socket, error_reply(413, "request body too large", false));
      } else if (ec != http::error::end_of_stream && ec != asio::error::eof &&
                 ec != asio::error::connection_reset && ec != asio::error::operation_aborted) {
        co_await write_all(socket,
                           error_reply(400, "malformed HTTP request: " + ec.message(), false));
      }
      break;
    }
    ++http_requests;
    auto& req = parser.get();
    const bool keep_alive = req.keep_alive();
    std::string_view target(req.target().data(), req.target().size());
    if (const auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
    // HEAD is GET without the body, as both engines' HTTP stacks answer it.
    const bool head = req.method() == http::verb::head;
    const bool get = req.method() == http::verb::get || head;
    const bool post = req.method() == http::verb::post;

    std::optional<Endpoint> endpoint;
    if (target == "/v1/completions" || target == "/completions") endpoint = Endpoint::completions;
    if (target == "/v1/chat/completions" || target == "/chat/completions") {
      endpoint = Endpoint::chat;
    }
    if (target == "/completion") endpoint = Endpoint::native_completion;

    std::string out;
    const bool authorized =
        options.api_key.empty() || !target.starts_with("/v1/") ||
        std::string_view(req[http::field::authorization]) == "Bearer " + options.api_key;
    if (req.method() == http::verb::options) {
      // What a path takes, asked without a key (a browser's preflight never sends one).
      out = http_io::response_head(
          200, server_headers, backend->content_type(ContentType::json), 0, keep_alive,
          options.cors_origin.empty()
              ? "Allow: GET, HEAD, POST, OPTIONS\r\n"
              : "Allow: GET, HEAD, POST, OPTIONS\r\nAccess-Control-Allow-Methods: GET, HEAD, "
                "POST, OPTIONS\r\nAccess-Control-Allow-Headers: Authorization, Content-Type\r\n"
                "Access-Control-Max-Age: 600\r\n");
    } else if (!authorized) {
      const HttpReply refused = backend->refusal(401);
      out = reply(refused, keep_alive);
    } else if (endpoint && post) {
      const std::string_view fault(req["X-Kvprof-Fault"]);
      if (!co_await handle_generate(socket, req.body(), *endpoint, keep_alive, fault) ||
          !keep_alive) {
        break;
      }
      continue;
    } else if (auto r = post ? backend->post(target, req.body()) : std::nullopt) {
      out = reply(*r, keep_alive);
    } else if ((target == "/tokenize" || target == "/detokenize") && post) {
      out = tokenize_reply(req.body(), target == "/detokenize", keep_alive);
    } else if (target == "/apply-template" && post) {
      out = apply_template_reply(req.body(), keep_alive);
    } else if (auto g = get ? backend->get(target) : std::nullopt) {
      out = reply(*g, keep_alive);
    } else {
      const bool known = endpoint || target == "/tokenize" || target == "/detokenize" ||
                         target == "/apply-template" || backend->get(target).has_value();
      const HttpReply refused = backend->refusal(known ? 405 : 404);
      out = reply(refused, keep_alive);
    }
    if (head) out.resize(out.find("\r\n\r\n") + 4);  // the headers only, Content-Length kept
    if (!co_await write_all(socket, out)) break;
    if (!keep_alive) break;
  }
  error_code ec;
  socket.shutdown(tcp::socket::shutdown_send, ec);
  socket.close(ec);
}

Server::Server(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

Server::~Server() {
  stop();
}

Expected<std::unique_ptr<Server>> Server::start(std::shared_ptr<Backend> backend,
                                                const ServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->backend = std::move(backend);
  impl->options = options;
  impl->server_headers = impl->backend->server_headers();
  if (!options.cors_origin.empty()) {
    const auto& origin = options.cors_origin;
    if (origin.size() > 1024 || std::any_of(origin.begin(), origin.end(), [](unsigned char c) {
          return c < 0x20 || c == 0x7f;
        })) {
      return fail(ErrorKind::usage, "--cors: an origin is one line, e.g. http://localhost:3000");
    }
    impl->server_headers += "Access-Control-Allow-Origin: " + origin + "\r\n";
  }
  impl->id_tag = fmt::format("{:08x}", std::random_device{}());
  if (auto ok = impl->bind(); !ok) return std::unexpected(ok.error());
  asio::co_spawn(*impl->ioc, impl->listen(), asio::detached);
  Impl* raw = impl.get();
  impl->io_thread = std::thread([raw] {
    auto guard = asio::make_work_guard(*raw->ioc);
    raw->ioc->run();
  });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

uint16_t Server::port() const {
  return m_impl->port;
}

std::string Server::base_url() const {
  const std::string& host = m_impl->options.host;
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return fmt::format("http://{}{}{}:{}/v1", v6 ? "[" : "", host, v6 ? "]" : "", port());
}

ServerStats Server::stats() const {
  return {m_impl->http_requests.load(), m_impl->completions.load(), m_impl->rejected.load(),
          m_impl->aborted.load(), m_impl->faults.load()};
}

void Server::stop() {
  if (!m_impl || m_impl->stopped.exchange(true)) return;
  m_impl->ioc->stop();
  if (m_impl->io_thread.joinable()) m_impl->io_thread.join();
  // No longer listening: a client connecting now is refused, not left waiting for an answer.
  error_code ignored;
  m_impl->acceptor.close(ignored);
}

}  // namespace kvprof::serve
