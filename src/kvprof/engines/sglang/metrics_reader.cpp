// SGLang's own /metrics families, by the names its releases give them.
#include "kvprof/engines/sglang/sglang.hpp"

#include "kvprof/metrics/families.hpp"

namespace kvprof::engines {

using namespace kvprof::metrics;  // NOLINT: the family readers every engine's metrics use

void read_sglang_metrics(const metrics::Exposition& expo, metrics::MetricsSnapshot& snap) {
  snap.kv_cache_usage = mean_of(expo, "sglang:token_usage");
  snap.kv_cache_used_tokens = sum_of(expo, "sglang:num_used_tokens");
  snap.kv_cache_capacity_tokens = to_count(sum_of(expo, "sglang:max_total_num_tokens"));
  snap.num_requests_running = sum_of(expo, "sglang:num_running_reqs");
  snap.num_requests_waiting = sum_of(expo, "sglang:num_queue_reqs");
  snap.num_retracted_reqs = sum_of(expo, "sglang:num_retracted_reqs");
  snap.num_preemptions_total = sum_of(expo, "sglang:num_retracted_requests_total");
  snap.prompt_tokens_total = sum_of(expo, "sglang:prompt_tokens_total");
  snap.generation_tokens_total = sum_of(expo, "sglang:generation_tokens_total");
}

}  // namespace kvprof::engines
