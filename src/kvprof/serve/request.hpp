// Reading a generation request the way llama-server reads it: /v1/completions and /completion
// take "prompt" as a string, an array of token ids, or a one-element array of either;
// /v1/chat/completions takes "messages" (formatted by the backend's chat template, then
// tokenized with special tokens, as llama-server does). max_tokens / max_completion_tokens /
// n_predict (-1 = until the context is full), stream, stream_options.include_usage, ignore_eos.
// No sockets here.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "kvprof/serve/backend.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::serve {

// How an engine reads a generation request's answer options: vLLM refuses a "stream" that is
// not a boolean, llama-server ignores it; llama-server refuses n != 1 (its message), vLLM samples
// n choices (up to max_choices here).
struct RequestDialect {
  bool strict_stream = false;
  std::string_view one_choice_message;  // the refusal of n != 1 when max_choices is 1
  uint32_t max_choices = 1;
};

// The engine's default dialect: llama-server's.
inline constexpr RequestDialect k_llama_server_dialect{false,
                                                       "Only one completion choice is allowed"};

// Reads what `doc` asks of its answer, as `dialect` reads it: stream,
// stream_options.include_usage, ignore_eos, stop strings (serve/stop_strings.hpp) and n; input
// error for a refused one.
Expected<void> read_answer_options(const nlohmann::json& doc, const RequestDialect& dialect,
                                   ParsedRequest& out);

// Parses `body` for `endpoint`, tokenizing text with `backend`; input error (HTTP 400) with
// llama-server's wording for a missing or malformed field.
Expected<ParsedRequest> parse_request(std::string_view body, Endpoint endpoint,
                                      const Backend& backend);

// The messages of a chat request's "messages" (role defaults to "user"; content a string or text
// parts); input error for anything else.
Expected<std::vector<ChatMessage>> chat_messages(const nlohmann::json& messages);

// The prompt tokens of a "prompt" value (string, token ids, or a one-element array of either);
// input error otherwise (several prompts in one request are refused).
Expected<std::vector<int32_t>> prompt_tokens(const nlohmann::json& prompt, const Backend& backend);

}  // namespace kvprof::serve
