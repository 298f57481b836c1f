// The simulator's reading of OpenAI-compatible /v1/completions and /v1/chat/completions
// requests, checked as vLLM checks them; the responses are serve/openai_wire.hpp's. No sockets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/serve/backend.hpp"
#include "kvprof/sim/sim_config.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::sim {

// Parses a completion (chat = false) or chat completion body into the request the front end
// serves (prompt token ids, max_tokens — max_model_len - prompt when the request gives none —,
// the answer options read as vLLM reads them). Errors: input (HTTP 400) for malformed JSON, bad
// fields, or a length beyond max_model_len (vLLM's wording); not_found (404) for another model
// name.
Expected<serve::ParsedRequest> parse_completion_request(std::string_view body, bool chat,
                                                        const SimConfig& config);

}  // namespace kvprof::sim
