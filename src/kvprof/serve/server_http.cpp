// Server: accepting connections, reading HTTP/1.1 requests (keep-alive), routing, and streaming
// a backend's events as OpenAI or llama-server SSE.

// GCC 12 at -O2 reports a false "mismatched new/delete" when it inlines Asio 1.74's coroutine
// frame allocator (see sim_http.cpp).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "kvprof/serve/http_io.hpp"  // first: it includes <utility> before Asio

#include <fmt/format.h>

#include <atomic>
#include <boost/asio/redirect_error.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <ctime>
#include <deque>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "kvprof/serve/request.hpp"
#include "kvprof/serve/server.hpp"
#include "kvprof/sim/openai_api.hpp"

namespace kvprof::serve {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using asio::redirect_error;
using asio::use_awaitable;
using boost::system::error_code;
using http_io::http_chunk;
using http_io::write_all;
using nlohmann::ordered_json;

namespace {

constexpr uint64_t k_max_body_bytes = 8ULL << 20;
constexpr uint32_t k_max_header_bytes = 64U << 10;
constexpr std::string_view k_server_headers = "Server: kvprof-serve\r\n";

std::string head(int status, std::string_view content_type, int64_t length, bool keep_alive) {
  return http_io::response_head(status, k_server_headers, content_type, length, keep_alive);
}

// Engine events of one request, delivered on the io thread; `signal` wakes the session.
struct Channel {
  explicit Channel(const asio::any_io_executor& ex) : signal(ex) {}
  asio::steady_timer signal;
  std::deque<GenerateEvent> events;
};

asio::awaitable<GenerateEvent> next_event(Channel& channel) {
  while (channel.events.empty()) {
    channel.signal.expires_at(asio::steady_timer::time_point::max());
    error_code ec;
    co_await channel.signal.async_wait(redirect_error(use_awaitable, ec));
  }
  GenerateEvent ev = std::move(channel.events.front());
  channel.events.pop_front();
  co_return ev;
}

// llama-server's /completion answer (whole, or the last streamed chunk with stop = true).
ordered_json native_json(std::string_view content, const std::vector<int32_t>& tokens, bool stop,
                         const std::string& model, const GenerateEvent* last) {
  ordered_json j{{"index", 0},
                 {"content", std::string(content)},
                 {"tokens", tokens},
                 {"id_slot", -1},
                 {"stop", stop}};
  if (last != nullptr) {
    j["model"] = model;
    j["tokens_predicted"] = last->completion_tokens;
    j["tokens_evaluated"] = last->prompt_tokens;
    j["stop_type"] = last->finish_reason == "stop" ? "eos" : "limit";
    j["truncated"] = false;
    j["timings"] = {{"prompt_n", last->prompt_tokens},
                    {"prompt_ms", last->prompt_ms},
                    {"predicted_n", last->completion_tokens},
                    {"predicted_ms", last->predicted_ms}};
  }
  return j;
}

}  // namespace

class Server::Impl {
 public:
  std::shared_ptr<Backend> backend;
  ServerOptions options;
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
  // Response ids are "chatcmpl-"/"cmpl-" + this server's random tag + the request number, so
  // ids of two servers (or two runs) do not repeat.
  const std::string id_tag = fmt::format("{:08x}", std::random_device{}());

  Expected<void> bind() {
    std::string host = options.host;
    if (host == "localhost") host = "127.0.0.1";
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    error_code ec;
    const auto address = asio::ip::make_address(host, ec);
    if (ec)
      return fail(ErrorKind::usage, fmt::format("--host: not an address: '{}'", options.host));
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

  asio::awaitable<void> listen() {
    for (;;) {
      error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(redirect_error(use_awaitable, ec));
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      if (ec) continue;
      socket.set_option(tcp::no_delay(true), ec);
      asio::co_spawn(*ioc, session(std::move(socket)), asio::detached);
    }
  }

  std::string reply(int status, std::string_view content_type, const std::string& body,
                    bool keep_alive) {
    if (status >= 400 && status < 500) ++rejected;
    return head(status, content_type, static_cast<int64_t>(body.size()), keep_alive) + body;
  }

  std::string error_reply(int status, std::string_view message, bool keep_alive) {
    return reply(status, "application/json; charset=utf-8", backend->error_body(status, message),
                 keep_alive);
  }

  // /tokenize and /detokenize, as llama-server: {"content": "..."} -> {"tokens": [...]} and back.
  std::string tokenize_reply(const std::string& body, bool detokenize, bool keep_alive) {
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
      return reply(200, "application/json; charset=utf-8",
                   ordered_json{{"content", backend->detokenize(tokens)}}.dump(), keep_alive);
    }
    if (!doc.is_object() || !doc.contains("content") || !doc["content"].is_string()) {
      return error_reply(400, "expected {\"content\": \"...\"}", keep_alive);
    }
    const bool add_special = doc.contains("add_special") && doc["add_special"].is_boolean() &&
                             doc["add_special"].get<bool>();
    auto tokens = backend->tokenize(doc["content"].get<std::string>(), add_special);
    if (!tokens) return error_reply(400, tokens.error().message, keep_alive);
    return reply(200, "application/json; charset=utf-8", ordered_json{{"tokens", *tokens}}.dump(),
                 keep_alive);
  }

  // /apply-template, as llama-server: {"messages": [...]} -> {"prompt": the formatted chat}.
  std::string apply_template_reply(const std::string& body, bool keep_alive) {
    const auto doc = nlohmann::json::parse(body, nullptr, false);
    if (!doc.is_object() || !doc.contains("messages")) {
      return error_reply(400, "'messages' is required", keep_alive);
    }
    auto messages = chat_messages(doc["messages"]);
    if (!messages) return error_reply(400, messages.error().message, keep_alive);
    auto prompt = backend->chat_prompt(*messages);
    if (!prompt) return error_reply(400, prompt.error().message, keep_alive);
    return reply(200, "application/json; charset=utf-8", ordered_json{{"prompt", *prompt}}.dump(),
                 keep_alive);
  }

  asio::awaitable<void> session(tcp::socket socket) {
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
          co_await write_all(socket, error_reply(400, "malformed HTTP request", false));
        }
        break;
      }
      ++http_requests;
      auto& req = parser.get();
      const bool keep_alive = req.keep_alive();
      std::string_view target(req.target().data(), req.target().size());
      if (const auto q = target.find('?'); q != std::string_view::npos)
        target = target.substr(0, q);
      const bool get = req.method() == http::verb::get;
      const bool post = req.method() == http::verb::post;

      std::optional<Endpoint> endpoint;
      if (target == "/v1/completions" || target == "/completions") endpoint = Endpoint::completions;
      if (target == "/v1/chat/completions" || target == "/chat/completions")
        endpoint = Endpoint::chat;
      if (target == "/completion") endpoint = Endpoint::native_completion;

      std::string out;
      if (endpoint && post) {
        if (!co_await handle_generate(socket, req.body(), *endpoint, keep_alive) || !keep_alive)
          break;
        continue;
      }
      if ((target == "/tokenize" || target == "/detokenize") && post) {
        out = tokenize_reply(req.body(), target == "/detokenize", keep_alive);
      } else if (target == "/apply-template" && post) {
        out = apply_template_reply(req.body(), keep_alive);
      } else if (auto r = get ? backend->get(target) : std::nullopt) {
        out = reply(r->status, r->content_type, r->body, keep_alive);
      } else {
        const bool known = endpoint || target == "/tokenize" || target == "/detokenize" ||
                           target == "/apply-template" || backend->get(target).has_value();
        out = known ? error_reply(405, "Method Not Allowed", keep_alive)
                    : error_reply(404, "File Not Found", keep_alive);
      }
      if (!co_await write_all(socket, out)) break;
      if (!keep_alive) break;
    }
    error_code ec;
    socket.shutdown(tcp::socket::shutdown_send, ec);
    socket.close(ec);
  }

  // Serves one generation request; false when the connection must close.
  asio::awaitable<bool> handle_generate(tcp::socket& socket, const std::string& body,
                                        Endpoint endpoint, bool keep_alive) {
    auto parsed = parse_request(body, endpoint, *backend);
    if (!parsed)
      co_return co_await write_all(socket, error_reply(400, parsed.error().message, keep_alive));
    if (auto refused = backend->admit(parsed->generate)) {
      co_return co_await write_all(
          socket, reply(refused->status, refused->content_type, refused->body, keep_alive));
    }
    const uint64_t number = ++completions;
    auto channel = std::make_shared<Channel>(socket.get_executor());
    std::weak_ptr<asio::io_context> weak_ioc = ioc;
    const uint64_t task =
        backend->submit(std::move(parsed->generate), [weak_ioc, channel](GenerateEvent ev) {
          auto io = weak_ioc.lock();
          if (!io) return;
          asio::post(*io, [channel, ev = std::move(ev)]() mutable {
            channel->events.push_back(std::move(ev));
            channel->signal.cancel();
          });
        });
    const bool chat = endpoint == Endpoint::chat;
    const bool native = endpoint == Endpoint::native_completion;
    const std::string model = backend->model_id();
    const sim::ResponseBuilder builder(chat, model, number,
                                       static_cast<int64_t>(std::time(nullptr)),
                                       parsed->include_usage, id_tag);
    auto give_up = [&] {
      backend->cancel(task);
      ++aborted;
    };

    if (!parsed->stream) {
      std::string text;
      std::vector<int32_t> tokens;
      GenerateEvent last;
      for (;;) {
        GenerateEvent ev = co_await next_event(*channel);
        text += ev.text;
        tokens.insert(tokens.end(), ev.tokens.begin(), ev.tokens.end());
        if (ev.finished) {
          last = std::move(ev);
          break;
        }
      }
      if (last.finish_reason == "error") {
        co_return co_await write_all(socket, error_reply(500, "llama_decode failed", keep_alive));
      }
      const std::string json =
          native ? native_json(text, tokens, true, model, &last).dump()
                 : builder.full_response(text, last.finish_reason, last.prompt_tokens,
                                         last.completion_tokens);
      if (!co_await write_all(socket,
                              reply(200, "application/json; charset=utf-8", json, keep_alive))) {
        give_up();
        co_return false;
      }
      co_return true;
    }

    std::string start = head(200, "text/event-stream", -1, keep_alive);
    if (chat) start += http_chunk(sim::sse_event(builder.role_chunk()));
    if (!co_await write_all(socket, start)) {
      give_up();
      co_return false;
    }
    GenerateEvent last;
    for (bool finished = false; !finished;) {
      GenerateEvent ev = co_await next_event(*channel);
      finished = ev.finished;
      std::string chunk;
      if (native) {
        if (!ev.tokens.empty())
          chunk = sim::sse_event(native_json(ev.text, ev.tokens, false, model, nullptr).dump());
        if (finished) chunk += sim::sse_event(native_json("", {}, true, model, &ev).dump());
      } else if (!ev.tokens.empty() || finished) {
        chunk = sim::sse_event(builder.text_chunk(ev.text, finished ? ev.finish_reason : ""));
      }
      if (!chunk.empty() && !co_await write_all(socket, http_chunk(chunk))) {
        give_up();
        co_return false;
      }
      if (finished) last = std::move(ev);
    }
    std::string tail;
    if (!native && parsed->include_usage) {
      tail += http_chunk(
          sim::sse_event(builder.usage_chunk(last.prompt_tokens, last.completion_tokens)));
    }
    if (!native) tail += http_chunk("data: [DONE]\n\n");
    tail += "0\r\n\r\n";
    co_return co_await write_all(socket, tail);
  }
};

Server::Server(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}

Server::~Server() {
  stop();
}

Expected<std::unique_ptr<Server>> Server::start(std::shared_ptr<Backend> backend,
                                                const ServerOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->backend = std::move(backend);
  impl->options = options;
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
          m_impl->aborted.load()};
}

void Server::stop() {
  if (!m_impl || m_impl->stopped.exchange(true)) return;
  m_impl->ioc->stop();
  if (m_impl->io_thread.joinable()) m_impl->io_thread.join();
}

}  // namespace kvprof::serve
