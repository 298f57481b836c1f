// The OpenAI wire format kvprof's servers (serve, serve-sim) speak, shaped like vLLM's: SSE
// events, streamed and final completion bodies, usage chunks and {"error": {...}} bodies. No
// sockets here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvprof::serve {

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
  // Chat only: the first chunk of choice `index`, {"role":"assistant","content":""}.
  [[nodiscard]] std::string role_chunk(uint32_t index = 0) const;
  // One streamed chunk of choice `index` with `text`; `finish_reason` empty = null.
  [[nodiscard]] std::string text_chunk(std::string_view text, std::string_view finish_reason,
                                       uint32_t index = 0) const;
  // The final usage chunk (empty choices).
  [[nodiscard]] std::string usage_chunk(uint32_t prompt_tokens, uint32_t completion_tokens) const;
  // One choice of a whole response.
  struct Choice {
    std::string text;
    std::string finish_reason;
  };
  // The whole non-streamed response: `choices` in order (index 0, 1, ...); completion tokens of
  // all of them, the prompt's once (as vLLM counts n choices).
  [[nodiscard]] std::string full_response(const std::vector<Choice>& choices,
                                          uint32_t prompt_tokens, uint32_t completion_tokens) const;
  // The same with one choice.
  [[nodiscard]] std::string full_response(std::string_view text, std::string_view finish_reason,
                                          uint32_t prompt_tokens, uint32_t completion_tokens) const;

 private:
  bool m_chat;
  std::string m_model;
  std::string m_id;
  int64_t m_created;
  bool m_include_usage;
};

}  // namespace kvprof::serve
