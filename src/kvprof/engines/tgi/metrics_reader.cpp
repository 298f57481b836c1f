// TGI's own /metrics families, by the names its releases give them.
#include "kvprof/engines/tgi/tgi.hpp"

#include "kvprof/metrics/families.hpp"

namespace kvprof::engines {

using namespace kvprof::metrics;  // NOLINT: the family readers every engine's metrics use

void read_tgi_metrics(const metrics::Exposition& expo, metrics::MetricsSnapshot& snap) {
  snap.num_requests_waiting = sum_of(expo, "tgi_queue_size");
  snap.num_requests_running = sum_of(expo, "tgi_batch_current_size");
  snap.batch_max_tokens = sum_of(expo, "tgi_batch_current_max_tokens");
}

}  // namespace kvprof::engines
