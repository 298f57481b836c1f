// The probe before the grid: the endpoint's own path, credentials and model are tried with one
// one-token completion, and the grid is checked against the server's max context, so a wrong URL
// path, a missing API key, a model the server does not serve or a grid the server cannot hold is
// one clear line before anything else is sent. A server that refuses token-ID prompts (llama.cpp:
// 400 "prompt must be a string") gets text prompts instead, with one warning.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/client/runner.hpp"
#include "kvprof/profile/server_answers.hpp"
#include "kvprof/profile/summary.hpp"
#include "kvprof/util/error.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::profile {

struct EndpointCheck {
  bool use_text_prompts = false;     // the server refused token-ID prompts: run the grid as text
  std::string token_prompt_refusal;  // the server's answer to the token-ID probe
  std::optional<uint64_t> max_context_tokens;  // the server's limit on prompt + output tokens
  std::string max_context_source;  // where it came from, e.g. "/v1/models max_model_len"
  double probe_ms = 0;             // how long the accepted probe completion took
  // Set when --model is not a name the server lists but the server answered for it anyway.
  std::string unlisted_model_note;
};

// Probes `run`'s endpoint as the grid `grid` will use it. Errors: usage (exit 2) when --model is
// not one the server lists and the server refuses the probe for it (a server that answers for
// any name, as llama-server does, is used with it: unlisted_model_note says so), or the grid's
// longest request (input + output) is longer than the
// server's max context; network (exit 1) when the probe completion gets no answer or a status
// other than 2xx (404, 401/403, 400, 5xx...), naming the status and the server's message. A 400
// to token IDs followed by a 2xx to a text prompt is no error: use_text_prompts is set.
Expected<EndpointCheck> check_endpoint(const client::RunOptions& run, const ServerInfo& server,
                                       const workload::GridOptions& grid,
                                       uint32_t timeout_ms = 15000);

// After a switch to text prompts: counts the tokens of one prompt per input length (at most 3)
// through the server's /tokenize and returns one line saying how they compare with the asked
// lengths, or that the counts come from each response's usage when /tokenize is not served.
std::string check_text_token_counts(const client::RunOptions& run,
                                    const std::vector<workload::RequestSpec>& requests,
                                    uint32_t timeout_ms = 5000);

}  // namespace kvprof::profile
