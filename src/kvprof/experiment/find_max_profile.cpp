// find-max trials as in-process profile runs (see find_max_profile.hpp).
#include "kvprof/experiment/find_max_profile.hpp"
#include "kvprof/util/utf8.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>

namespace kvprof::experiment {

uint32_t count_queued(const std::vector<client::RequestRecord>& records) {
  std::vector<int64_t> ends;
  for (const auto& r : records) {
    if (r.status == client::RequestStatus::ok && r.end_ns != client::k_no_time)
      ends.push_back(r.end_ns);
  }
  std::sort(ends.begin(), ends.end());
  uint32_t queued = 0;
  for (const auto& r : records) {
    if (r.first_token_ns == client::k_no_time) continue;
    const auto first_end = std::upper_bound(ends.begin(), ends.end(), r.actual_send_ns);
    if (first_end != ends.end() && *first_end < r.first_token_ns) ++queued;
  }
  return queued;
}

Trial make_profile_trial(const ProfileTrialSettings& s, const profile::ProfileDeps& deps) {
  return [s, deps](uint32_t concurrency, uint32_t step) -> Expected<TrialOutcome> {
    profile::ProfileConfig config;
    auto& g = config.grid;
    g.input_lens = {s.input_len};
    g.output_lens = {s.output_len};
    g.concurrencies = {concurrency};
    g.prefix_modes = {workload::PrefixMode::low};
    g.n_per_condition = std::max(1U, s.waves);
    g.count_mode = workload::CountMode::times_concurrency;
    g.seed = s.seed;
    config.run = s.run;
    config.gpus = s.gpus;
    config.gpu_interval_ms = s.gpu_interval_ms;
    config.host_pid_auto = s.sample_host;
    config.metrics_interval_ms = s.metrics_interval_ms;
    config.output_dir = s.output_dir;
    config.run_tag = fmt::format("step{:02}_c{}", step, concurrency);
    config.baseline_s = s.baseline_s;
    config.warmup_requests = s.warmup_requests;
    config.post_warmup_s = s.post_warmup_s;
    config.configuration = {{"find_max_step", step}, {"concurrency", concurrency}};
    std::mutex mutex;
    std::vector<client::RequestRecord> records;
    profile::ProfileDeps d = deps;
    d.on_request = [&](const client::RequestRecord& r) {
      std::lock_guard lock(mutex);
      if (records.size() >= (1U << 20)) return;
      records.push_back(r);
      records.back().chunks.clear();  // only the send, first-token and end times are used
    };
    auto outcome = profile::run_profile(config, d);
    if (!outcome) return std::unexpected(outcome.error());
    const auto& report = outcome->report;
    TrialOutcome o;
    o.concurrency = concurrency;
    o.run_dir = outcome->run_dir.string();
    o.n_requests = uint64_t{concurrency} * std::max(1U, s.waves);
    if (!report.conditions.empty()) {
      const auto& c = report.conditions.front();
      o.n_ok = c.requests.n_ok;
      if (c.requests.ttft_ms.n > 0) o.ttft_p99_ms = c.requests.ttft_ms.p99;
      if (c.requests.itl_ms.n > 0) o.itl_p99_ms = c.requests.itl_ms.p99;
      o.preemptions = c.server.preemptions;
    }
    o.n_errors = o.n_requests - std::min(o.n_requests, o.n_ok);
    const auto& server = report.server_during_load;
    if (server.preemptions)
      o.preemptions = std::max(o.preemptions.value_or(0), *server.preemptions);
    o.peak_running = server.peak_num_requests_running;
    o.peak_waiting = server.peak_num_requests_waiting;
    o.peak_kv_cache_usage = server.peak_kv_cache_usage;
    o.num_gpu_blocks = server.num_gpu_blocks;
    o.block_size_tokens = server.block_size_tokens;
    for (const auto& gpu : report.peak.per_gpu) {
      if (gpu.total_bytes && *gpu.total_bytes > 0) {
        const double frac =
            static_cast<double>(gpu.max_used_bytes) / static_cast<double>(*gpu.total_bytes);
        o.memory_frac = std::max(o.memory_frac.value_or(0), frac);
      }
    }
    for (const auto& r : records) {
      if (r.status != client::RequestStatus::ok && o.first_error.empty()) {
        o.first_error = to_valid_utf8(utf8_prefix(r.error_text, 200));
      }
    }
    o.queued_requests = count_queued(records);
    if (outcome->interrupted) {
      o.interrupted = true;
      o.first_error = "interrupted";
    }
    return o;
  };
}

}  // namespace kvprof::experiment
