// Server: one generation request — read and admitted by the backend, streamed as OpenAI or
// llama-server SSE (or answered whole), with the front end's injected faults.

// GCC 12 at -O2 reports a false "mismatched new/delete" when it inlines Asio 1.74's coroutine
// frame allocator (see server_http.cpp).
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include "kvprof/serve/server_impl.hpp"  // first: it includes <utility> before Asio

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/redirect_error.hpp>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "kvprof/serve/openai_wire.hpp"
#include "kvprof/serve/stop_strings.hpp"

namespace kvprof::serve {

using asio::redirect_error;
using asio::use_awaitable;
using boost::system::error_code;
using http_io::http_chunk;
using http_io::write_all;
using nlohmann::ordered_json;

namespace {

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

asio::awaitable<void> sleep_s(double seconds) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_after(std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
  error_code ec;
  co_await timer.async_wait(redirect_error(use_awaitable, ec));
}

// Closes the connection with a TCP RST, as a crashed server's kernel would.
void reset_connection(tcp::socket& socket) {
  error_code ec;
  socket.set_option(asio::socket_base::linger(true, 0), ec);
  socket.close(ec);
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

bool strikes_mid_stream(FaultKind kind) {
  return kind == FaultKind::reset || kind == FaultKind::stall || kind == FaultKind::malformed_sse;
}

}  // namespace

asio::awaitable<bool> Server::Impl::handle_generate(tcp::socket& socket, const std::string& body,
                                                    Endpoint endpoint, bool keep_alive,
                                                    std::string_view fault_header) {
  auto parsed = backend->read_request(body, endpoint);
  if (!parsed) {
    const int status = parsed.error().kind == ErrorKind::not_found ? 404 : 400;
    co_return co_await write_all(socket, error_reply(status, parsed.error().message, keep_alive));
  }
  if (auto refused = backend->admit(parsed->generate)) {
    co_return co_await write_all(socket, reply(*refused, keep_alive));
  }
  const uint64_t number = ++completions;
  auto fault_or = request_fault(options.faults, fault_header, number);
  if (!fault_or) {
    co_return co_await write_all(socket, error_reply(400, fault_or.error().message, keep_alive));
  }
  const FaultSpec fault = *fault_or;
  if (fault.kind != FaultKind::none) ++faults;
  switch (fault.kind) {
    case FaultKind::status_500:
      co_return co_await write_all(
          socket, error_reply(500, "injected fault: internal server error", keep_alive));
    case FaultKind::status_503:
      co_return co_await write_all(
          socket, error_reply(503, "injected fault: service unavailable", keep_alive));
    case FaultKind::status_429: {
      const auto retry = static_cast<int64_t>(std::ceil(fault.seconds));
      co_return co_await write_all(socket,
                                   error_reply(429, "injected fault: too many requests", keep_alive,
                                               fmt::format("Retry-After: {}\r\n", retry)));
    }
    default:
      break;
  }

  // n choices: n sequences of the engine from the one prompt, each with its stop strings.
  const uint32_t n = std::max<uint32_t>(1, parsed->n);
  std::vector<StopScan> stops(n, StopScan(parsed->stop));
  auto channel = std::make_shared<Channel>(socket.get_executor());
  std::weak_ptr<asio::io_context> weak_ioc = ioc;
  std::vector<uint64_t> tasks;
  for (uint32_t i = 0; i < n; ++i) {
    GenerateRequest request = i + 1 < n ? parsed->generate : std::move(parsed->generate);
    tasks.push_back(backend->submit(std::move(request), [weak_ioc, channel, i](GenerateEvent ev) {
      auto io = weak_ioc.lock();
      if (!io) return;
      ev.choice = i;
      asio::post(*io, [channel, ev = std::move(ev)]() mutable {
        channel->events.push_back(std::move(ev));
        channel->signal.cancel();
      });
    }));
  }
  const bool chat = endpoint == Endpoint::chat;
  const bool native = endpoint == Endpoint::native_completion;
  const std::string model = backend->model_id();
  const ResponseBuilder builder(chat, model, number, static_cast<int64_t>(std::time(nullptr)),
                                parsed->include_usage, id_tag);
  auto give_up = [&] {
    for (const uint64_t task : tasks)
      backend->cancel(task);
    ++aborted;
  };
  // The text of `ev` that may go out; at a stop string the engine stops that choice and `ev`
  // becomes its last event, finished by "stop".
  auto apply_stop = [&](GenerateEvent& ev) {
    StopScan& stop = stops[ev.choice];
    ev.text = stop.feed(ev.text);
    if (stop.stopped() && !ev.finished) {
      backend->cancel(tasks[ev.choice]);
      ev.finished = true;
      ev.finish_reason = "stop";
    } else if (ev.finished && !stop.stopped()) {
      ev.text += stop.flush();
    }
  };
  // Tokens of all choices, the prompt's once.
  std::vector<GenerateEvent> lasts(n);
  const auto completion_tokens = [&] {
    uint32_t sum = 0;
    for (const auto& last : lasts)
      sum += last.completion_tokens;
    return sum;
  };
  // A mid-stream fault strikes once `after_tokens` tokens went out (or at the end of a shorter
  // answer).
  uint32_t sent = 0;
  bool fault_done = !strikes_mid_stream(fault.kind);
  auto fault_due = [&](bool at_end) {
    return !fault_done && (sent >= fault.after_tokens || at_end);
  };
  if (fault.kind == FaultKind::slow_first_token && !parsed->stream) co_await sleep_s(fault.seconds);

  if (!parsed->stream) {
    std::vector<std::string> texts(n);
    std::vector<int32_t> tokens;  // choice 0's, for llama-server's answer (n is 1 there)
    for (uint32_t finished = 0; finished < n;) {
      GenerateEvent ev = co_await next_event(*channel);
      if (fault.kind == FaultKind::reset && fault_due(false)) {
        reset_connection(socket);
        give_up();
        co_return false;
      }
      sent += static_cast<uint32_t>(ev.tokens.size());
      apply_stop(ev);
      texts[ev.choice] += ev.text;
      if (ev.choice == 0) tokens.insert(tokens.end(), ev.tokens.begin(), ev.tokens.end());
      if (ev.finished) {
        ++finished;
        lasts[ev.choice] = std::move(ev);
      }
    }
    if (fault.kind == FaultKind::reset) {
      reset_connection(socket);
      ++aborted;
      co_return false;
    }
    if (fault.kind == FaultKind::stall) co_await sleep_s(fault.seconds);
    std::vector<ResponseBuilder::Choice> choices;
    for (uint32_t i = 0; i < n; ++i) {
      if (lasts[i].finish_reason == "error") {
        co_return co_await write_all(socket, error_reply(500, "the engine failed", keep_alive));
      }
      choices.push_back({std::move(texts[i]), lasts[i].finish_reason});
    }
    std::string json =
        native ? native_json(choices[0].text, tokens, true, model, &lasts[0]).dump()
               : builder.full_response(choices, lasts[0].prompt_tokens, completion_tokens());
    if (fault.kind == FaultKind::malformed_sse) json.resize(json.size() / 2);  // broken JSON
    if (!co_await write_all(socket, reply(200, ContentType::json, json, keep_alive))) {
      give_up();
      co_return false;
    }
    co_return true;
  }

  std::string start = stream_head(keep_alive);
  for (uint32_t i = 0; chat && i < n; ++i)
    start += http_chunk(sse_event(builder.role_chunk(i)));
  if (!co_await write_all(socket, start)) {
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

  for (uint32_t n_finished = 0; n_finished < n;) {
    GenerateEvent ev = co_await next_event(*channel);
    apply_stop(ev);
    const bool finished = ev.finished;
    if (!ev.tokens.empty() && !co_await apply_fault(false)) {
      give_up();
      co_return false;
    }
    std::string chunk;
    if (native) {
      if (!ev.tokens.empty())
        chunk = sse_event(native_json(ev.text, ev.tokens, false, model, nullptr).dump());
      if (finished) chunk += sse_event(native_json("", {}, true, model, &ev).dump());
    } else if (!ev.tokens.empty() || finished) {
      chunk = sse_event(builder.text_chunk(ev.text, finished ? ev.finish_reason : "", ev.choice));
    }
    if (!chunk.empty() && !co_await write_all(socket, http_chunk(chunk))) {
      give_up();
      co_return false;
    }
    sent += static_cast<uint32_t>(ev.tokens.size());
    if (finished) {
      ++n_finished;
      lasts[ev.choice] = std::move(ev);
    }
  }
  if (!co_await apply_fault(true)) {
    ++aborted;
    co_return false;
  }
  std::string tail;
  if (!native && parsed->include_usage) {
    tail += http_chunk(sse_event(builder.usage_chunk(lasts[0].prompt_tokens, completion_tokens())));
  }
  if (!native) tail += http_chunk("data: [DONE]\n\n");
  tail += "0\r\n\r\n";
  co_return co_await write_all(socket, tail);
}

}  // namespace kvprof::serve
