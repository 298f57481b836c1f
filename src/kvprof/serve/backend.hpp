// The seam between an OpenAI-compatible HTTP front end (serve/server.hpp) and the engine that
// generates: a small table of operations. A new engine is a new implementation of Backend, not a
// branch in the server. LlamaBackend (llama_backend.hpp) runs libllama in-process.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::serve {

struct GenerateRequest {
  std::vector<int32_t> prompt_tokens;
  uint32_t max_tokens = 0;  // 0: until the slot's context is full
  bool ignore_eos = false;
};

// The generation endpoints: OpenAI's completions and chat completions, llama-server's native
// /completion.
enum class Endpoint { completions, chat, native_completion };

// A generation request as read from its body.
struct ParsedRequest {
  GenerateRequest generate;
  bool stream = false;
  bool include_usage = false;
  std::vector<std::string> stop;  // stop strings (serve/stop_strings.hpp)
  uint32_t n = 1;                 // choices: sequences sampled from the one prompt
};

// One step's output for one request, delivered in order; the last has finished = true.
struct GenerateEvent {
  std::vector<int32_t> tokens;  // newly generated tokens
  std::string text;             // their text
  bool finished = false;
  std::string finish_reason;  // "stop", "length", or "error"
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;  // generated so far
  double prompt_ms = 0;
  double predicted_ms = 0;
  uint32_t choice = 0;  // which of the request's n choices (set by the front end)
};

using EventSink = std::function<void(GenerateEvent)>;

// One message of a chat request.
struct ChatMessage {
  std::string role;
  std::string content;
};

// The messages' contents joined with newlines: a chat for an engine without a template.
inline std::string plain_chat_join(std::span<const ChatMessage> messages) {
  std::string text;
  for (const auto& m : messages) {
    if (!text.empty()) text += "\n";
    text += m.content;
  }
  return text;
}

// What an answer's body is. The front end names it in Content-Type as the engine does
// (Backend::content_type), so no answer goes out without one.
enum class ContentType : uint8_t { json, prometheus_text, event_stream };

// A whole HTTP answer to an engine-specific request.
struct HttpReply {
  int status = 200;
  ContentType content_type = ContentType::json;
  std::string body;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // The model id clients send and /v1/models lists.
  [[nodiscard]] virtual std::string model_id() const = 0;
  // The tokens of `text`; input error when the engine cannot tokenize it.
  [[nodiscard]] virtual Expected<std::vector<int32_t>> tokenize(std::string_view text,
                                                                bool add_special) const = 0;
  // Reads a generation request's body for `endpoint`: input error (HTTP 400) for a malformed
  // one, not_found (HTTP 404) for one the engine does not serve (another model's name). The
  // default reads it as llama-server does (serve/request.hpp).
  [[nodiscard]] virtual Expected<ParsedRequest> read_request(std::string_view body,
                                                             Endpoint endpoint) const;
  // The prompt text of a conversation: the engine's chat template applied, the assistant's turn
  // opened; input error when it cannot be formatted. Without a template: plain_chat_join.
  [[nodiscard]] virtual Expected<std::string> chat_prompt(
      std::span<const ChatMessage> messages) const {
    return plain_chat_join(messages);
  }
  // The text of `tokens`.
  [[nodiscard]] virtual std::string detokenize(const std::vector<int32_t>& tokens) const = 0;
  // Fills in a default max_tokens and checks that the request fits; an error answer (the
  // engine's status and wording) when it is refused.
  [[nodiscard]] virtual std::optional<HttpReply> admit(GenerateRequest& request) const = 0;
  // Queues an admitted request; `sink` is called on the engine's thread with every event.
  // Returns the task id (for cancel()).
  virtual uint64_t submit(GenerateRequest request, EventSink sink) = 0;
  // Drops a request whose client went away (its sink is not called again).
  virtual void cancel(uint64_t task_id) = 0;
  // The engine's own GET endpoints (/health, /v1/models, /metrics, /slots, /props, ...);
  // nullopt when `path` is not one.
  [[nodiscard]] virtual std::optional<HttpReply> get(std::string_view path) const = 0;
  // The engine's own POST endpoints other than generation (e.g. vLLM's /tokenize); nullopt when
  // `path` is not one, and the front end's llama-server-shaped /tokenize, /detokenize and
  // /apply-template answer.
  [[nodiscard]] virtual std::optional<HttpReply> post(std::string_view path,
                                                      std::string_view body) const {
    (void)path;
    (void)body;
    return std::nullopt;
  }
  // The Content-Type the engine sends for `type`; the default is llama-server's (cpp-httplib).
  [[nodiscard]] virtual std::string_view content_type(ContentType type) const {
    switch (type) {
      case ContentType::prometheus_text:
        return "text/plain; version=0.0.4";
      case ContentType::event_stream:
        return "text/event-stream";
      case ContentType::json:
        break;
    }
    return "application/json; charset=utf-8";
  }
  // The headers every answer carries ("Name: value\r\n" lines), naming the server.
  [[nodiscard]] virtual std::string server_headers() const { return "Server: kvprof-serve\r\n"; }
  // The engine's answer when the front end refuses a request itself: 401 (no or wrong API key),
  // 404 (no such path) or 405 (a path that takes another method).
  [[nodiscard]] virtual HttpReply refusal(int status) const {
    const char* message = status == 401   ? "Invalid API Key"
                          : status == 405 ? "Method Not Allowed"
                                          : "File Not Found";
    return {status, ContentType::json, error_body(status, message)};
  }
  // The engine's error body for `status` with `message`.
  [[nodiscard]] virtual std::string error_body(int status, std::string_view message) const = 0;
  // Stops the engine; submitted requests get no more events. Idempotent.
  virtual void stop() = 0;
};

}  // namespace kvprof::serve
