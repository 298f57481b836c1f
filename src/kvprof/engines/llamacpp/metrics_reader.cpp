// llama.cpp's own /metrics families, by the names its releases give them.
#include "kvprof/engines/llamacpp/llamacpp.hpp"

#include "kvprof/metrics/families.hpp"

namespace kvprof::engines {

using namespace kvprof::metrics;  // NOLINT: the family readers every engine's metrics use

void read_llamacpp_metrics(const metrics::Exposition& expo, metrics::MetricsSnapshot& snap) {
  snap.kv_cache_usage = mean_of(expo, "llamacpp:kv_cache_usage_ratio");
  snap.kv_cache_used_tokens = sum_of(expo, "llamacpp:kv_cache_tokens");
  snap.num_requests_running = sum_of(expo, "llamacpp:requests_processing");
  snap.num_requests_waiting = sum_of(expo, "llamacpp:requests_deferred");
  snap.prompt_tokens_total = sum_of(expo, "llamacpp:prompt_tokens_total");
  snap.generation_tokens_total = sum_of(expo, "llamacpp:tokens_predicted_total");
}

}  // namespace kvprof::engines
