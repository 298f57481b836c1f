// vLLM's own /metrics families, by the names its releases give them.
#include "kvprof/engines/vllm/vllm.hpp"

#include <cstdint>
#include <optional>

#include "kvprof/metrics/families.hpp"

namespace kvprof::engines {

using namespace kvprof::metrics;  // NOLINT: the family readers every engine's metrics use

void read_vllm_metrics(const metrics::Exposition& expo, metrics::MetricsSnapshot& snap) {
  snap.kv_cache_usage = mean_first(expo, {"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"});
  snap.num_requests_running = sum_of(expo, "vllm:num_requests_running");
  snap.num_requests_waiting = sum_of(expo, "vllm:num_requests_waiting");
  snap.num_preemptions_total =
      sum_first(expo, {"vllm:num_preemptions_total", "vllm:num_preemptions"});
  snap.prefix_cache_queries_total =
      sum_first(expo, {"vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries",
                       "vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries"});
  snap.prefix_cache_hits_total =
      sum_first(expo, {"vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits",
                       "vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits"});
  snap.prompt_tokens_total = sum_of(expo, "vllm:prompt_tokens_total");
  snap.generation_tokens_total = sum_of(expo, "vllm:generation_tokens_total");

  // cache_config_info is an info gauge: its labels carry the engine's CacheConfig, one series per
  // engine index. Blocks and capacity are summed over engines.
  std::optional<uint64_t> blocks;
  std::optional<uint64_t> capacity;
  for_each_sample(expo, "vllm:cache_config_info", [&](const Sample& s) {
    const auto n_blocks = parse_label_count(s.label("num_gpu_blocks"));
    const auto block_size = parse_label_count(s.label("block_size"));
    if (block_size && !snap.block_size_tokens) snap.block_size_tokens = block_size;
    if (!n_blocks) return;
    uint64_t sum = 0;
    if (!__builtin_add_overflow(blocks.value_or(0), *n_blocks, &sum)) blocks = sum;
    uint64_t tokens = 0;
    if (block_size && !__builtin_mul_overflow(*n_blocks, *block_size, &tokens) &&
        !__builtin_add_overflow(capacity.value_or(0), tokens, &sum)) {
      capacity = sum;
    }
  });
  snap.num_gpu_blocks = blocks;
  snap.kv_cache_capacity_tokens = capacity;
}

}  // namespace kvprof::engines
