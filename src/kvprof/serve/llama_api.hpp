// llama-server's JSON and Prometheus shapes, as its sources (tools/server) write them: the error
// body, /slots, /metrics (llamacpp: names), /health and /v1/models. No sockets, no engine here.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/serve/batcher.hpp"

namespace kvprof::serve {

// {"error":{"code":N,"message":...,"type":...}} with llama-server's type for the status
// (invalid_request_error, not_found_error, not_supported_error, server_error, unavailable_error).
nlohmann::ordered_json llama_error_json(int status, std::string_view message);

// The 400 answer to a request longer than a slot: type exceed_context_size_error, with
// n_prompt_tokens and n_ctx, as llama-server sends it.
nlohmann::ordered_json llama_exceed_context_json(std::string_view message, uint32_t n_prompt_tokens,
                                                 uint32_t n_ctx);

// GET /slots: one object per slot (id, n_ctx, speculative, is_processing, n_past, and, once the
// slot served a task, id_task, n_prompt_tokens, n_prompt_tokens_processed, n_prompt_tokens_cache,
// params, next_token: [{has_next_token, has_new_line, n_remain, n_decoded}]).
nlohmann::ordered_json slots_json(const std::vector<SlotView>& slots);

// Moves the longest part of `pending` that is complete UTF-8 out of it and returns it, with
// invalid bytes replaced by U+FFFD; a multi-byte character cut at the end stays in `pending`
// (tokens can end inside one), unless `flush`, which empties `pending`. JSON needs valid UTF-8.
std::string take_utf8(std::string& pending, bool flush);

// GET /metrics: llama-server's counters and gauges under the "llamacpp:" prefix.
std::string llama_metrics_text(const BatcherStats& stats);

}  // namespace kvprof::serve
