// The simulator's HTTP side: accepting connections, reading HTTP/1.1 requests (keep-alive),
// routing the endpoints, streaming completions as SSE, and injecting faults.

// GCC 12 at -O2 reports a false "mismatched new/delete" when it inlines Asio 1.74's coroutine
// frame allocator (operator new falls back to ::operator new, the paired delete is the frame's
// own).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "kvprof/sim/sim_server_impl.hpp"  // first: it includes <utility> before Asio

#include <fmt/format.h>

#include <boost/asio/redirect_error.hpp>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "kvprof/serve/http_io.hpp"
#include "kvprof/sim/metrics_text.hpp"
#include "kvprof/sim/openai_api.hpp"
#include "kvprof/sim/tokenizer.hpp"

namespace kvprof::sim {

namespace {

using asio::redirect_error;
using asio::use_awaitable;
using boost::system::error_code;

constexpr uint64_t k_max_body_bytes = 8ULL << 20;
constexpr uint32_t k_max_header_bytes = 64U << 10;

constexpr std::string_view k_sim_server_headers = "Server: kvprof-sim\r\nX-Kvprof-Simulated: 1\r\n";

// The status line and headers; `content_length` < 0 means chunked.
std::string response_head(int status, std::string_view content_type, int64_t content_length,
                          bool keep_alive, std::string_view extra_headers = {}) {
  return serve::http_io::response_head(status, k_sim_server_headers, content_type, content_length,
                                       keep_alive, extra_headers);
}

using serve::http_io::http_chunk;
using serve::http_io::write_all;

double fault_draw(uint64_t seed, uint64_t request_number) {
  uint64_t x = seed ^ (request_number * 0x9e3779b97f4a7c15ULL);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) / static_cast<double>(1ULL << 53);
}

asio::awaitable<void> sleep_s(double seconds) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
  error_code ec;
  co_await timer.async_wait(redirect_error(use_awaitable, ec));
}

// Waits for the next engine output of a request.
asio::awaitable<RequestOutput> next_event(Channel& channel) {
  while (channel.events.empty()) {
    channel.signal.expires_at(asio::steady_timer::time_point::max());
    error_code ec;
    co_await channel.signal.async_wait(redirect_error(use_awaitable, ec));
  }
  RequestOutput out = std::move(channel.events.front());
  channel.events.pop_front();
  co_return out;
}

void reset_connection(tcp::socket& socket) {
  error_code ec;
  socket.set_option(asio::socket_base::linger(true, 0), ec);
  socket.close(ec);
}

}  // namespace

asio::awaitable<void> SimServer::Impl::listen() {
  for (;;) {
    error_code ec;
    tcp::socket socket = co_await m_acceptor.async_accept(redirect_error(use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !m_acceptor.is_open()) co_return;
    if (ec) continue;  // e.g. too many open files: keep serving the others
    socket.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(m_ioc, session(std::move(socket)), asio::detached);
  }
}

asio::awaitable<void> SimServer::Impl::session(tcp::socket socket) {
  boost::beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(k_max_body_bytes);
    parser.header_limit(k_max_header_bytes);
    error_code ec;
    co_await http::async_read(socket, buffer, parser, redirect_error(use_awaitable, ec));
    if (ec) {
      if (ec == http::error::body_limit) {
        const std::string body = error_body(413, "request body too large");
        co_await write_all(socket,
                           response_head(413, "application/json", body.size(), false) + body);
      } else if (ec != http::error::end_of_stream && ec != asio::error::eof &&
                 ec != asio::error::connection_reset && ec != asio::error::operation_aborted) {
        const std::string body = error_body(400, "malformed HTTP request: " + ec.message());
        co_await write_all(socket,
                           response_head(400, "application/json", body.size(), false) + body);
      }
      break;
    }
    ++m_http_requests;
    auto& req = parser.get();
    const bool keep_alive = req.keep_alive();
    std::string_view target(req.target().data(), req.target().size());
    if (const auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
    const auto method = req.method();
    const bool get = method == http::verb::get;
    const bool post = method == http::verb::post;

    auto respond = [&](int status, std::string_view content_type, const std::string& body,
                       std::string_view extra = {}) {
      if (status >= 400 && status < 500) ++m_rejected;
      return response_head(status, content_type, static_cast<int64_t>(body.size()), keep_alive,
                           extra) +
             body;
    };
    std::string reply;
    bool keep_going = true;
    const bool is_completion = target == "/v1/completions";
    const bool is_chat = target == "/v1/chat/completions";

    const bool authorized =
        m_config.api_key.empty() || !target.starts_with("/v1/") ||
        std::string_view(req[http::field::authorization]) == "Bearer " + m_config.api_key;
    if (!authorized) {
      reply = respond(401, "application/json", R"({"error":"Unauthorized"})");
    } else if (target == "/health" && get) {
      reply = respond(200, "application/json", "");
    } else if (target == "/v1/models" && get) {
      nlohmann::ordered_json card{{"id", m_config.model},
                                  {"object", "model"},
                                  {"created", static_cast<int64_t>(std::time(nullptr))},
                                  {"owned_by", "kvprof-sim"},
                                  {"root", m_config.model},
                                  {"parent", nullptr},
                                  {"max_model_len", m_config.max_model_len},
                                  {"simulated", true}};
      nlohmann::ordered_json list{{"object", "list"},
                                  {"data", nlohmann::ordered_json::array({card})}};
      reply = respond(200, "application/json", list.dump());
    } else if (target == "/version" && get) {
      nlohmann::ordered_json v{
          {"version", fmt::format("kvprof-sim {} (SIMULATED vllm)", KVPROF_VERSION)},
          {"simulated", true},
          {"engine", "vllm"}};
      reply = respond(200, "application/json", v.dump());
    } else if (target == "/metrics" && get && m_config.serve_metrics) {
      EngineStats stats;
      {
        std::lock_guard lock(m_stats_mu);
        stats = m_engine_stats;
      }
      reply =
          respond(200, "text/plain; version=0.0.4; charset=utf-8", render_metrics(m_config, stats));
    } else if (target == "/dcgm/metrics" && get && !m_config.dcgm_hostname.empty()) {
      EngineStats stats;
      {
        std::lock_guard lock(m_stats_mu);
        stats = m_engine_stats;
      }
      reply = respond(200, "text/plain; version=0.0.4; charset=utf-8",
                      render_dcgm_metrics(m_config, stats));
    } else if (target == "/tokenize" && post) {
      const auto json = nlohmann::json::parse(req.body(), nullptr, false);
      Expected<std::vector<uint32_t>> tokens =
          fail(ErrorKind::input, "expected {\"prompt\": ...} or {\"messages\": [...]}");
      if (json.is_object() && json.contains("prompt")) {
        tokens = sim_tokenize_prompt(json["prompt"]);
      } else if (json.is_object() && json.contains("messages")) {
        tokens = sim_tokenize_chat(json["messages"]);
      }
      if (!tokens) {
        reply = respond(400, "application/json", error_body(400, tokens.error().message));
      } else {
        nlohmann::ordered_json out{{"count", tokens->size()},
                                   {"max_model_len", m_config.max_model_len},
                                   {"tokens", *tokens}};
        reply = respond(200, "application/json", out.dump());
      }
    } else if ((is_completion || is_chat) && post) {
      keep_going = co_await handle_completion(socket, req.body(), is_chat, keep_alive,
                                              std::string(req["X-Kvprof-Fault"]));
      if (!keep_going || !keep_alive) break;
      continue;
    } else {
      const bool known = target == "/health" || target == "/v1/models" || target == "/version" ||
                         (target == "/metrics" && m_config.serve_metrics) ||
                         target == "/tokenize" || is_completion || is_chat;
      reply = known ? respond(405, "application/json", R"({"detail":"Method Not Allowed"})")
                    : respond(404, "application/json", R"({"detail":"Not Found"})");
    }
    if (!co_await write_all(socket, reply)) break;
    if (!keep_alive) break;
  }
  error_code ec;
  socket.shutdown(tcp::socket::shutdown_send, ec);
  socket.close(ec);
}

asio::awaitable<bool> SimServer::Impl::handle_completion(tcp::socket& socket,
                                                         const std::string& body, bool chat,
                                                         bool keep_alive,
                                                         const std::string& fault_header) {
  auto reply_error = [&](int status, std::string_view message,
                         std::string_view extra = {}) -> std::string {
    if (status >= 400 && status < 500) ++m_rejected;
    const std::string err = error_body(status, message);
    return response_head(status, "application/json", static_cast<int64_t>(err.size()), keep_alive,
                         extra) +
           err;
  };
  if (m_config.reject_token_prompts && !chat) {
    const auto json = nlohmann::json::parse(body, nullptr, false);
    if (json.is_object() && json.contains("prompt") && !json["prompt"].is_string()) {
      // llama.cpp's answer to a prompt it does not take.
      co_return co_await write_all(socket, reply_error(400, "\"prompt\" must be a string"));
    }
  }
  auto parsed = parse_completion_request(body, chat, m_config);
  if (!parsed) {
    const int status = parsed.error().kind == ErrorKind::not_found ? 404 : 400;
    co_return co_await write_all(socket, reply_error(status, parsed.error().message));
  }
  const uint64_t number = ++m_next_request_number;
  FaultSpec fault;
  if (!fault_header.empty()) {
    auto spec = parse_fault_spec(fault_header);
    if (!spec)
      co_return co_await write_all(socket,
                                   reply_error(400, "X-Kvprof-Fault: " + spec.error().message));
    fault = *spec;
  } else if (m_config.fault_rate > 0 &&
             fault_draw(m_config.fault_seed, number) < m_config.fault_rate) {
    fault = m_config.fault;
  }
  if (fault.kind != FaultKind::none) ++m_faults;
  switch (fault.kind) {
    case FaultKind::status_500:
      co_return co_await write_all(socket,
                                   reply_error(500, "simulated fault: internal server error"));
    case FaultKind::status_503:
      co_return co_await write_all(socket,
                                   reply_error(503, "simulated fault: service unavailable"));
    case FaultKind::status_429: {
      const auto retry = static_cast<int64_t>(std::ceil(fault.seconds));
      co_return co_await write_all(socket, reply_error(429, "simulated fault: too many requests",
                                                       fmt::format("Retry-After: {}\r\n", retry)));
    }
    default:
      break;
  }

  const CompletionRequest& request = *parsed;
  const uint32_t prompt_tokens = static_cast<uint32_t>(request.prompt_token_ids.size());
  auto channel = std::make_shared<Channel>(socket.get_executor());
  submit(Submission{number, request.prompt_token_ids, request.max_tokens, now_s(), channel});
  const ResponseBuilder builder(chat, m_config.model, number,
                                static_cast<int64_t>(std::time(nullptr)), request.include_usage);

  // Fault points come before token number `after_tokens` (or at the end of a shorter answer).
  bool fault_done = false;
  uint32_t sent = 0;
  auto fault_due = [&](bool at_end) {
    return !fault_done && (sent >= fault.after_tokens || at_end) &&
           (fault.kind == FaultKind::reset || fault.kind == FaultKind::stall ||
            fault.kind == FaultKind::malformed_sse);
  };
  auto give_up = [&] {
    abort(number);
    ++m_streams_aborted;
  };

  if (!request.stream) {
    if (fault.kind == FaultKind::slow_first_token) co_await sleep_s(fault.seconds);
    std::string text;
    std::string finish_reason;
    for (;;) {
      RequestOutput out = co_await next_event(*channel);
      for (uint32_t token : out.new_token_ids) {
        if (fault.kind == FaultKind::reset && fault_due(false)) {
          reset_connection(socket);
          give_up();
          co_return false;
        }
        text += sim_token_text(token);
        ++sent;
      }
      if (out.finished) {
        finish_reason = out.finish_reason;
        break;
      }
    }
    if (fault.kind == FaultKind::reset) {
      reset_connection(socket);
      ++m_streams_aborted;
      co_return false;
    }
    if (fault.kind == FaultKind::stall) co_await sleep_s(fault.seconds);
    std::string json = builder.full_response(text, finish_reason, prompt_tokens, sent);
    if (fault.kind == FaultKind::malformed_sse) json.resize(json.size() / 2);  // broken JSON
    co_return co_await write_all(
        socket,
        response_head(200, "application/json", static_cast<int64_t>(json.size()), keep_alive) +
            json);
  }

  std::string head = response_head(200, "text/event-stream; charset=utf-8", -1, keep_alive);
  if (chat) head += http_chunk(sse_event(builder.role_chunk()));
  if (!co_await write_all(socket, head)) {
    give_up();
    co_return false;
  }
  if (fault.kind == FaultKind::slow_first_token) co_await sleep_s(fault.seconds);

  // Applies a due reset/stall/malformed fault; false when the connection is gone.
  auto apply_fault = [&](bool at_end) -> asio::awaitable<bool> {
    if (!fault_due(at_end)) co_return true;
    fault_done = true;
    if (fault.kind == FaultKind::reset) {
      reset_connection(socket);
      co_return false;
    }
    if (fault.kind == FaultKind::stall) {
      co_await sleep_s(fault.seconds);
      co_return true;
    }
    const std::string broken = fmt::format(
        "data: "
        "{{\"id\":\"{}\",\"object\":\"text_completion\",\"choices\":[{{\"index\":0,\"text\":\n\n"
        "this line is not server-sent events\n\n",
        builder.id());
    co_return co_await write_all(socket, http_chunk(broken));
  };

  for (bool finished = false; !finished;) {
    RequestOutput out = co_await next_event(*channel);
    finished = out.finished;
    for (size_t i = 0; i < out.new_token_ids.size(); ++i) {
      if (!co_await apply_fault(false)) {
        give_up();
        co_return false;
      }
      const bool last = finished && i + 1 == out.new_token_ids.size();
      const std::string chunk =
          builder.text_chunk(sim_token_text(out.new_token_ids[i]), last ? out.finish_reason : "");
      if (!co_await write_all(socket, http_chunk(sse_event(chunk)))) {
        give_up();
        co_return false;
      }
      ++sent;
    }
  }
  if (!co_await apply_fault(true)) {
    ++m_streams_aborted;
    co_return false;
  }
  std::string tail;
  if (request.include_usage)
    tail += http_chunk(sse_event(builder.usage_chunk(prompt_tokens, sent)));
  tail += http_chunk("data: [DONE]\n\n");
  tail += "0\r\n\r\n";
  co_return co_await write_all(socket, tail);
}

}  // namespace kvprof::sim
