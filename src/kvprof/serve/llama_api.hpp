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

// The shape of /slots and /metrics as a llama-server build writes them (kvprof serve
// --api-release): what each field and gauge became, and when.
struct ApiShape {
  bool state_field = false;         // an integer "state" instead of "is_processing" (before b4283)
  bool kv_gauges = false;           // /metrics kv_cache_usage_ratio and kv_cache_tokens (to b5440)
  bool next_token_array = true;     // next_token as an array of one object (from b6723, #16391)
  bool prompt_token_counts = true;  // n_prompt_tokens and n_prompt_tokens_processed (b9276)
  bool n_past = true;               // kvprof serve's own: each slot's cells (no llama-server)
};

// The shape of llama-server build `build` (0: kvprof serve's own, the newest with n_past).
ApiShape api_shape(uint32_t build);

// GET /slots: one object per slot (id, n_ctx, speculative, is_processing, n_past, and, once the
// slot served a task, id_task, n_prompt_tokens, n_prompt_tokens_processed, n_prompt_tokens_cache,
// params, next_token: [{has_next_token, has_new_line, n_remain, n_decoded}]), in `shape`.
nlohmann::ordered_json slots_json(const std::vector<SlotView>& slots, const ApiShape& shape = {});

// Moves the longest part of `pending` that is complete UTF-8 out of it and returns it, with
// invalid bytes replaced by U+FFFD; a multi-byte character cut at the end stays in `pending`
// (tokens can end inside one), unless `flush`, which empties `pending`. JSON needs valid UTF-8.
std::string take_utf8(std::string& pending, bool flush);

// GET /metrics: llama-server's counters and gauges under the "llamacpp:" prefix; the KV gauges
// of early builds when `shape` has them (used cells of `kv_cells` in all).
std::string llama_metrics_text(const BatcherStats& stats, const ApiShape& shape = {},
                               uint64_t kv_cells = 0);

}  // namespace kvprof::serve
