// The OpenAI-compatible streaming API as vLLM, SGLang and TensorRT-LLM serve it: request bodies
// for /v1/completions and /v1/chat/completions, and the parsing of one streamed chunk.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kvprof/client/sse_parser.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::client {

enum class ApiKind { completions, chat };

// "completions" / "chat".
std::string_view api_kind_name(ApiKind api);
// Parses "completions" or "chat"; an input error otherwise.
Expected<ApiKind> parse_api_kind(std::string_view text);
// The URL path for `api`: "/v1/completions" or "/v1/chat/completions".
std::string_view api_path(ApiKind api);
// Joins a base URL ("http://host:8000", ".../v1" or a full endpoint URL) with the path of `api`.
std::string endpoint_url(std::string_view base_url, ApiKind api);

struct GenerationParams {
  std::string model;  // left out of the body when empty (the server then uses its only model)
  uint32_t max_tokens = 128;
  bool ignore_eos = true;
  double temperature = 0.0;
};

// The JSON body of a streaming completions request whose prompt is token IDs.
std::string build_completions_body(std::span<const uint32_t> prompt_token_ids,
                                   const GenerationParams& params);
// The JSON body of a streaming request with a text prompt: completions ("prompt") or chat (one
// user message).
std::string build_text_body(ApiKind api, std::string_view prompt_text,
                            const GenerationParams& params);

struct Usage {
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
};

// What one SSE event of an OpenAI stream carries.
struct StreamChunk {
  enum class Kind { data, done, error };
  Kind kind = Kind::data;
  std::string text;       // generated text in this chunk (completions text / chat delta)
  uint32_t n_tokens = 0;  // tokens this chunk carries (see parse_stream_event)
  std::optional<Usage> usage;
  std::string finish_reason;
  std::string error_message;  // for Kind::error: the server's message (one line)
  int error_code = 0;         // for Kind::error: the "code" when numeric, else 0
};

// The most tokens one streamed chunk may stand for (continuous usage larger than this is capped).
inline constexpr uint32_t k_max_tokens_per_chunk = 4096;

// Parses one event. `data: [DONE]` gives Kind::done; `{"error": {...}}` or an "error" event type
// gives Kind::error. A chunk with non-empty text counts 1 token, unless the server reports
// usage.completion_tokens in every chunk (vLLM's continuous usage), where the count is the
// difference from `completion_tokens_so_far` (at most k_max_tokens_per_chunk). Returns an input
// error when the data is not JSON or not an object.
Expected<StreamChunk> parse_stream_event(const SseEventView& event,
                                         uint64_t completion_tokens_so_far = 0);

}  // namespace kvprof::client
