// The canonical snapshot of a serving engine's scheduler and KV cache, read from a parsed /metrics
// scrape (by the engine's own reader: engines::read_metrics) and llama.cpp's /slots JSON. A field
// the server does not report stays absent, never 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kvprof/engines/engine.hpp"
#include "kvprof/metrics/prometheus.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::metrics {

// Returns the engine whose metric prefix (its row's: "vllm:", "sglang:", "tgi_", "llamacpp:")
// names the most families; unknown when none does.
engines::Engine guess_engine(const Exposition& exposition);

// Where a snapshot's KV usage came from: the engine's /metrics gauge, or llama.cpp's /slots
// (tokens held by the busy slots over the slots' n_ctx; llama.cpp no longer exports KV gauges).
enum class KvSource : uint8_t { none, metrics, slots };

// "", "metrics" or "slots".
std::string_view kv_source_name(KvSource source);

struct MetricsSnapshot {
  engines::Engine engine = engines::Engine::unknown;
  // Fraction of the KV cache in use, 0..1 (vLLM kv_cache_usage_perc, SGLang token_usage,
  // llama.cpp kv_cache_usage_ratio); the mean over engines/ranks when several report.
  std::optional<double> kv_cache_usage;
  std::optional<double> kv_cache_used_tokens;  // SGLang num_used_tokens, llama.cpp kv_cache_tokens
  std::optional<uint64_t>
      kv_cache_capacity_tokens;            // vLLM blocks x block size, SGLang max_total_num_tokens
  std::optional<uint64_t> num_gpu_blocks;  // vLLM cache_config_info
  std::optional<uint64_t> block_size_tokens;  // vLLM cache_config_info
  std::optional<double> num_requests_running;
  std::optional<double> num_requests_waiting;
  std::optional<double> num_preemptions_total;       // vLLM preemptions, SGLang retracted requests
  std::optional<double> num_retracted_reqs;          // SGLang's gauge of the last retraction
  std::optional<double> prefix_cache_queries_total;  // tokens queried (vLLM)
  std::optional<double> prefix_cache_hits_total;     // tokens hit (vLLM)
  std::optional<double> prompt_tokens_total;
  std::optional<double> generation_tokens_total;
  std::optional<double> batch_max_tokens;     // TGI tgi_batch_current_max_tokens
  std::optional<double> slots_busy;           // llama.cpp /slots
  std::optional<double> slots_total;          // llama.cpp /slots
  KvSource kv_cache_source = KvSource::none;  // of kv_cache_usage
};

// The samples of the engine's own families that no engine can report: negative counts or sizes,
// a KV share over 1. engines::read_metrics leaves them out; the scraper says so.
size_t count_impossible_values(const Exposition& exposition);

struct SlotsSummary {
  uint64_t slots_total = 0;
  uint64_t slots_busy = 0;
  uint64_t n_ctx_total_tokens = 0;  // sum of the slots' n_ctx
  uint64_t n_ctx_max_tokens = 0;    // the largest one slot states
  // Tokens the busy slots hold in the KV cache ("n_past", else prompt tokens + n_decoded); absent
  // when no slot says. Idle slots' cached prompts are free for reuse and not counted.
  std::optional<uint64_t> kv_used_tokens;
};

// Parses llama.cpp's GET /slots answer (a JSON array of slots with "is_processing" or an older
// integer "state", "n_ctx", and per busy slot "n_past" or "n_prompt_tokens" and
// next_token.n_decoded); an input error when it is not such an array or holds over 65536 slots.
Expected<SlotsSummary> parse_llamacpp_slots(std::string_view json_text);

}  // namespace kvprof::metrics
