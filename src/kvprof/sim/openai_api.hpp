// The OpenAI-compatible request and response bodies of the simulator, shaped like vLLM's:
// parsing /v1/completions and /v1/chat/completions requests, building SSE chunks, final
// responses, usage chunks and {"error": {...}} bodies. No sockets here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/sim/sim_config.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::sim {

struct CompletionRequest {
  bool chat = false;
  std::string model;
  std::vector<uint32_t> prompt_token_ids;
  uint32_t max_tokens = 0;  // max_model_len - prompt when the request gives none
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // accepted; the simulated model never emits EOS anyway
};

// Parses a completion (chat = false) or chat completion body. Errors: input (HTTP 400) for
// malformed JSON, bad fields, or a length beyond max_model_len (vLLM's wording); not_found (404)
// for another model name.
Expected<CompletionRequest> parse_completion_request(std::string_view body, bool chat,
                                                     const SimConfig& config);

// vLLM's error body: {"error":{"message":...,"type":...,"param":null,"code":N}}.
std::string error_body(int http_status, std::string_view message);

// "data: <json>\n\n", one server-sent event.
std::string sse_event(std::string_view json);

// Builds the bodies of one completion response, streamed or not.
class ResponseBuilder {
 public:
  // The response id is "chatcmpl-" (chat) or "cmpl-", then `id_tag`, then the request number in
  // hex: serve-sim's tag is "sim", kvprof serve's a random one per server.
  ResponseBuilder(bool chat, std::string model, uint64_t request_number, int64_t created_unix_s,
                  bool include_usage, std::string_view id_tag = "sim");

  [[nodiscard]] const std::string& id() const { return m_id; }
  // Chat only: the first chunk, {"role":"assistant","content":""}.
  [[nodiscard]] std::string role_chunk() const;
  // One streamed chunk with `text`; `finish_reason` empty = null.
  [[nodiscard]] std::string text_chunk(std::string_view text, std::string_view finish_reason) const;
  // The final usage chunk (empty choices).
  [[nodiscard]] std::string usage_chunk(uint32_t prompt_tokens, uint32_t completion_tokens) const;
  // The whole non-streamed response.
  [[nodiscard]] std::string full_response(std::string_view text, std::string_view finish_reason,
                                          uint32_t prompt_tokens, uint32_t completion_tokens) const;

 private:
  bool m_chat;
  std::string m_model;
  std::string m_id;
  int64_t m_created;
  bool m_include_usage;
};

}  // namespace kvprof::sim
