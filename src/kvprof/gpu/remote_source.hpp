// GPU memory read from the monitoring of the node a server runs on, not from this machine's
// driver: a DCGM exporter's /metrics (dcgm.hpp) or a Prometheus server that scrapes one
// (prometheus_api.hpp). Both answer with DCGM's framebuffer series (DCGM_FI_DEV_FB_USED/FREE/
// RESERVED/TOTAL, in MiB, labelled gpu, UUID, Hostname, modelName), which `RemoteSource` turns
// into the MemorySource every sampler reads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/gpu/memory_source.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::gpu {

// One label matcher of a selector such as {Hostname="node1",gpu=~"0|1"}.
struct LabelMatcher {
  enum class Op { equal, not_equal, regex, not_regex };
  std::string name;
  Op op = Op::equal;
  std::string value;
};

// Parses a Prometheus-style selector "{name="v",name!="v",name=~"re",name!~"re"}" (braces
// optional, at most 1 KiB and 16 matchers); an input error naming the bad part otherwise.
Expected<std::vector<LabelMatcher>> parse_label_selector(std::string_view selector);

// True when the labels (name -> value) satisfy every matcher; regexes match the whole value.
bool labels_match(const std::map<std::string, std::string>& labels,
                  const std::vector<LabelMatcher>& matchers);

// One framebuffer reading of one GPU (or MIG instance) as a DCGM series gives it.
struct RemoteGpuReading {
  std::string key;  // Hostname/UUID-or-gpu[/GPU_I_ID]: stable across readings
  std::optional<std::string> hostname;
  std::optional<std::string> uuid;
  std::optional<std::string> model_name;
  std::optional<unsigned> gpu_label;  // the exporter's `gpu` index
  std::optional<uint64_t> used_bytes, free_bytes, reserved_bytes, total_bytes;
};

// Folds one DCGM framebuffer sample (its metric name, labels and value in MiB) into `readings`
// (kept sorted by host, then GPU index); samples of other metrics are ignored.
void add_dcgm_sample(std::vector<RemoteGpuReading>& readings, std::string_view metric_name,
                     const std::map<std::string, std::string>& labels, double value_mib);

// The memory of one reading as the sampler records it (total = used + free + reserved, or the
// exporter's own total).
DeviceMemory to_device_memory(const RemoteGpuReading& reading, unsigned index);

// Every GPU's reading at one instant of a monitoring system's history.
struct TimedRemoteReadings {
  int64_t t_wall_ms = 0;  // Unix epoch ms
  std::vector<RemoteGpuReading> readings;
};

// A MemorySource over a function that fetches every GPU's reading at once. The GPU list (and so
// the indices 0..n-1, ordered by host and GPU index) is fixed by the first successful fetch; a
// fetch is reused for `min_refresh_ms`, so sampling n GPUs costs one request. Thread-safe.
class RemoteSource final : public MemorySource {
 public:
  using Fetch = std::function<Expected<std::vector<RemoteGpuReading>>()>;
  // Every GPU's readings in [from_wall_ms, to_wall_ms] every step_ms, in time order.
  using RangeFetch = std::function<Expected<std::vector<TimedRemoteReadings>>(
      int64_t from_wall_ms, int64_t to_wall_ms, uint32_t step_ms)>;

  // `what` names the source in errors ("DCGM exporter http://node1:9400/metrics").
  RemoteSource(std::string what, Fetch fetch, uint32_t min_refresh_ms);
  // A source that also keeps history: `range_fetch` reads it, `history_name` says from where
  // ("Prometheus query_range").
  RemoteSource(std::string what, Fetch fetch, uint32_t min_refresh_ms, RangeFetch range_fetch,
               std::string history_name);

  Expected<unsigned> device_count() override;
  Expected<DeviceInfo> device_info(unsigned gpu) override;
  Expected<DeviceMemory> sample_device(unsigned gpu) override;
  // Remote monitoring has no per-process figures: always empty.
  Expected<std::vector<ProcessMemory>> sample_processes(unsigned gpu) override;
  using MemorySource::sample_processes;
  DriverInfo driver_info() override { return {}; }
  [[nodiscard]] std::optional<std::string> history_name() const override;
  // The history of `gpus` (indices as fixed by the first fetch); GPUs the history does not name
  // are left out of it.
  Expected<std::vector<PastReading>> history(const std::vector<unsigned>& gpus,
                                             int64_t from_wall_ms, int64_t to_wall_ms,
                                             uint32_t step_ms) override;

  // The readings of the last fetch (for tests and the summary's notes).
  [[nodiscard]] std::vector<RemoteGpuReading> last_readings() const;

 private:
  Expected<void> refresh_locked();
  Expected<const RemoteGpuReading*> find_locked(unsigned gpu);

  std::string m_what;
  Fetch m_fetch;
  RangeFetch m_range_fetch;
  std::string m_history_name;
  std::chrono::milliseconds m_min_refresh;
  mutable std::mutex m_mutex;
  std::vector<std::string> m_keys;  // index -> key, fixed by the first fetch
  std::vector<RemoteGpuReading> m_readings;
  std::chrono::steady_clock::time_point m_fetched_at{};
  bool m_have_fetch = false;
};

}  // namespace kvprof::gpu
