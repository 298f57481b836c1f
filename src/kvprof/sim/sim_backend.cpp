// SimBackend: the simulated engine's thread, its requests and its endpoints (see sim_backend.hpp).
#include "kvprof/sim/sim_backend.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include "kvprof/serve/openai_wire.hpp"
#include "kvprof/sim/live_state.hpp"
#include "kvprof/sim/metrics_text.hpp"
#include "kvprof/sim/openai_api.hpp"
#include "kvprof/sim/tokenizer.hpp"

namespace kvprof::sim {

SimBackend::SimBackend(SimConfig config) : m_config(std::move(config)), m_engine(m_config) {
  m_engine_stats = m_engine.stats();
}

SimBackend::~SimBackend() {
  stop();
}

Expected<void> SimBackend::start() {
  if (!m_config.live_state_path.empty()) {
    LiveStateWriter writer(m_config.live_state_path, std::chrono::microseconds(0));
    const LiveMemory idle{m_config.total_bytes, m_config.reserved_bytes,
                          sim_used_bytes(m_config, 0, 0), static_cast<uint32_t>(::getpid())};
    writer.update(idle, std::chrono::steady_clock::now());
    if (!writer.last_error().empty()) {
      return fail(ErrorKind::io, "live-state file: " + writer.last_error());
    }
  }
  m_engine_thread = std::thread([this] { engine_loop(); });
  return {};
}

EngineStats SimBackend::engine_stats() const {
  std::lock_guard lock(m_stats_mu);
  return m_engine_stats;
}

uint64_t SimBackend::live_state_writes() const {
  std::lock_guard lock(m_stats_mu);
  return m_live_state_writes;
}

Expected<std::vector<int32_t>> SimBackend::tokenize(std::string_view text,
                                                    bool /*add_special*/) const {
  return token_ids_int32(sim_tokenize(text));
}

std::string SimBackend::detokenize(const std::vector<int32_t>& tokens) const {
  std::string text;
  for (const int32_t t : tokens)
    text += sim_token_text(static_cast<uint32_t>(t));
  return text;
}

Expected<serve::ParsedRequest> SimBackend::read_request(std::string_view body,
                                                        serve::Endpoint endpoint) const {
  if (endpoint == serve::Endpoint::native_completion) {
    return fail(ErrorKind::not_found, "Not Found");  // vLLM has no /completion
  }
  const bool chat = endpoint == serve::Endpoint::chat;
  if (m_config.reject_token_prompts && !chat) {
    const auto json = nlohmann::json::parse(body, nullptr, false);
    if (json.is_object() && json.contains("prompt") && !json["prompt"].is_string()) {
      return fail(ErrorKind::input, "\"prompt\" must be a string");  // llama.cpp's answer
    }
  }
  return parse_completion_request(body, chat, m_config);
}

std::optional<serve::HttpReply> SimBackend::admit(serve::GenerateRequest& /*request*/) const {
  return std::nullopt;  // read_request checked the length against max_model_len
}

uint64_t SimBackend::submit(serve::GenerateRequest request, serve::EventSink sink) {
  const uint64_t id = ++m_next_id;
  std::vector<uint32_t> prompt(request.prompt_tokens.begin(), request.prompt_tokens.end());
  {
    std::lock_guard lock(m_mu);
    m_inbox.push_back(
        Submission{id, std::move(prompt), request.max_tokens, now_s(), std::move(sink)});
  }
  m_cv.notify_one();
  return id;
}

void SimBackend::cancel(uint64_t task_id) {
  {
    std::lock_guard lock(m_mu);
    m_aborts.push_back(task_id);
  }
  m_cv.notify_one();
}

std::optional<serve::HttpReply> SimBackend::get(std::string_view path) const {
  const auto text_reply = [](std::string body) {
    return serve::HttpReply{200, serve::ContentType::prometheus_text, std::move(body)};
  };
  if (path == "/health") return serve::HttpReply{200, serve::ContentType::json, ""};
  if (path == "/v1/models") {
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
    return serve::HttpReply{200, serve::ContentType::json, list.dump()};
  }
  if (path == "/version") {
    nlohmann::ordered_json v{
        {"version", fmt::format("kvprof-sim {} (SIMULATED vllm)", KVPROF_VERSION)},
        {"simulated", true},
        {"engine", "vllm"}};
    return serve::HttpReply{200, serve::ContentType::json, v.dump()};
  }
  if (path == "/metrics" && m_config.serve_metrics) {
    return text_reply(render_metrics(m_config, engine_stats()));
  }
  if (path == "/dcgm/metrics" && !m_config.dcgm_hostname.empty()) {
    return text_reply(render_dcgm_metrics(m_config, engine_stats()));
  }
  return std::nullopt;
}

// vLLM's /tokenize: {"prompt": ...} or {"messages": [...]} -> count, max_model_len, tokens.
std::optional<serve::HttpReply> SimBackend::post(std::string_view path,
                                                 std::string_view body) const {
  if (path != "/tokenize") return std::nullopt;
  const auto json = nlohmann::json::parse(body, nullptr, false);
  Expected<std::vector<uint32_t>> tokens =
      fail(ErrorKind::input, "expected {\"prompt\": ...} or {\"messages\": [...]}");
  if (json.is_object() && json.contains("prompt")) {
    tokens = sim_tokenize_prompt(json["prompt"]);
  } else if (json.is_object() && json.contains("messages")) {
    tokens = sim_tokenize_chat(json["messages"]);
  }
  if (!tokens) {
    return serve::HttpReply{400, serve::ContentType::json, error_body(400, tokens.error().message)};
  }
  nlohmann::ordered_json out{
      {"count", tokens->size()}, {"max_model_len", m_config.max_model_len}, {"tokens", *tokens}};
  return serve::HttpReply{200, serve::ContentType::json, out.dump()};
}

// FastAPI's: JSONResponse names no charset; text answers get Starlette's "; charset=utf-8".
std::string_view SimBackend::content_type(serve::ContentType type) const {
  switch (type) {
    case serve::ContentType::prometheus_text:
      return "text/plain; version=0.0.4; charset=utf-8";
    case serve::ContentType::event_stream:
      return "text/event-stream; charset=utf-8";
    case serve::ContentType::json:
      break;
  }
  return "application/json";
}

std::string SimBackend::server_headers() const {
  return "Server: kvprof-sim\r\nX-Kvprof-Simulated: 1\r\n";
}

// vLLM's own: its API-key middleware's body, and FastAPI's for a path or method it lacks.
serve::HttpReply SimBackend::refusal(int status) const {
  std::string body = status == 401   ? R"({"error":"Unauthorized"})"
                     : status == 405 ? R"({"detail":"Method Not Allowed"})"
                                     : R"({"detail":"Not Found"})";
  return {status, serve::ContentType::json, std::move(body)};
}

std::string SimBackend::error_body(int status, std::string_view message) const {
  return serve::error_body(status, message);
}

void SimBackend::stop() {
  if (m_stopped.exchange(true)) return;
  {
    std::lock_guard lock(m_mu);
    m_stopping = true;
  }
  m_cv.notify_all();
  if (m_engine_thread.joinable()) m_engine_thread.join();
}

void SimBackend::engine_loop() {
  using Clock = std::chrono::steady_clock;
  const auto interval =
      std::chrono::microseconds(static_cast<int64_t>(m_config.live_state_min_interval_ms * 1000.0));
  LiveStateWriter writer(m_config.live_state_path, interval);
  const auto pid = static_cast<uint32_t>(::getpid());
  auto memory_now = [&](uint32_t step_tokens) {
    return LiveMemory{m_config.total_bytes, m_config.reserved_bytes,
                      sim_used_bytes(m_config, m_engine.block_pool().num_used(), step_tokens), pid};
  };
  auto publish = [&] {
    std::lock_guard lock(m_stats_mu);
    m_engine_stats = m_engine.stats();
    m_live_state_writes = writer.writes();
  };
  writer.update(memory_now(0), Clock::now());
  publish();

  for (;;) {
    std::vector<Submission> submissions;
    std::vector<uint64_t> aborts;
    {
      std::unique_lock lock(m_mu);
      auto ready = [&] {
        return m_stopping || !m_inbox.empty() || !m_aborts.empty() || m_engine.has_unfinished();
      };
      while (!ready()) {
        if (const auto due = writer.pending_due()) {
          if (m_cv.wait_until(lock, *due, ready)) break;
          lock.unlock();
          writer.flush(Clock::now());
          publish();
          lock.lock();
        } else {
          m_cv.wait(lock, ready);
        }
      }
      if (m_stopping) break;
      submissions.swap(m_inbox);
      aborts.swap(m_aborts);
    }
    for (auto& s : submissions) {
      m_engine.add_request(s.id, std::move(s.prompt_token_ids), s.max_tokens, s.arrival_s);
      m_sinks[s.id] = std::move(s.sink);
    }
    for (uint64_t id : aborts) {
      m_engine.abort_request(id);
      m_sinks.erase(id);
    }
    if (!m_engine.has_unfinished()) {
      writer.update(memory_now(0), Clock::now());
      publish();
      continue;
    }

    const auto step_start = Clock::now();
    const StepPlan plan = m_engine.schedule();
    writer.update(memory_now(plan.num_tokens()), step_start);
    publish();
    const double step_ms = sim_step_ms(m_config, plan.num_prefill_tokens, plan.num_decode_tokens);
    const auto step_end =
        step_start + std::chrono::microseconds(static_cast<int64_t>(step_ms * 1000));
    {
      std::unique_lock lock(m_mu);
      if (m_cv.wait_until(lock, step_end, [&] { return m_stopping; })) break;
    }
    auto outputs = m_engine.complete_step(now_s());
    // As an engine frees a finished request's memory before its answer leaves: once idle, the
    // idle figures are published before any client can see the last token (a profile's
    // baseline, right after its probe request, never reads the probe's step).
    if (!m_engine.has_unfinished()) {
      writer.update(memory_now(0), Clock::now());
      writer.flush(Clock::now(), /*force=*/true);
    }
    for (auto& out : outputs) {
      const auto it = m_sinks.find(out.request_id);
      if (it == m_sinks.end()) continue;
      serve::GenerateEvent ev;
      ev.tokens = token_ids_int32(out.new_token_ids);
      ev.text = detokenize(ev.tokens);
      ev.finished = out.finished;
      ev.finish_reason = out.finish_reason;
      ev.prompt_tokens = out.num_prompt_tokens;
      ev.completion_tokens = out.num_output_tokens;
      it->second(std::move(ev));
      if (out.finished) m_sinks.erase(it);
    }
    publish();
  }
  m_sinks.clear();
  // The simulated process is gone: no process line, nothing in use.
  writer.update(LiveMemory{m_config.total_bytes, m_config.reserved_bytes, 0, 0}, Clock::now());
  writer.flush(Clock::now(), /*force=*/true);
  publish();
}

}  // namespace kvprof::sim
