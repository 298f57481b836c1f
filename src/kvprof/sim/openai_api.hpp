// The simulator's reading of OpenAI-compatible /v1/completions and /v1/chat/completions
// requests, checked as vLLM checks them; the responses are serve/openai_wire.hpp's. No sockets.
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
  bool include_usage = false;     // stream_options.include_usage
  bool ignore_eos = false;        // accepted; the simulated model never emits EOS anyway
  std::vector<std::string> stop;  // stop strings
};

// Parses a completion (chat = false) or chat completion body. Errors: input (HTTP 400) for
// malformed JSON, bad fields, or a length beyond max_model_len (vLLM's wording); not_found (404)
// for another model name.
Expected<CompletionRequest> parse_completion_request(std::string_view body, bool chat,
                                                     const SimConfig& config);

}  // namespace kvprof::sim
