// find-max trials as in-process llama.cpp bench runs (see find_max_bench.hpp).
#include "kvprof/experiment/find_max_bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "kvprof/bench/bench_estimate.hpp"
#include "kvprof/bench/bench_run.hpp"
#include "kvprof/client/stats.hpp"
#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/llama/engine.hpp"

namespace kvprof::experiment {
namespace {

// The KV cells the engine reported for the step's context: llama.cpp's own line
// ("llama_kv_cache: size = ... (N cells, ...)") in engine.log, else its n_ctx.
std::optional<uint64_t> engine_kv_cells(const bench::BenchReport& r) {
  const std::filesystem::path log = std::filesystem::path(r.run_dir) / "engine.log";
  if (auto parsed = enginelog::parse_engine_log_file(log, engines::log_parse_options())) {
    if (parsed->settings.kv_cells) return parsed->settings.kv_cells->value;
  }
  if (r.context.contains("n_ctx") && r.context["n_ctx"].is_number_unsigned()) {
    return r.context["n_ctx"].get<uint64_t>();
  }
  return std::nullopt;
}

bool ran_on_gpu(const bench::BenchReport& r) {
  if (!r.lib.contains("devices") || !r.lib["devices"].is_array()) return false;
  return std::any_of(r.lib["devices"].begin(), r.lib["devices"].end(),
                     [](const auto& d) { return d.is_object() && d.value("type", "") == "gpu"; });
}

// Total memory of every GPU the source sees; none when it cannot say.
std::optional<uint64_t> gpu_total_bytes(gpu::MemorySource& source) {
  const auto n = source.device_count();
  if (!n || *n == 0) return std::nullopt;
  uint64_t total = 0;
  for (unsigned i = 0; i < *n; ++i) {
    const auto m = source.sample_device(i);
    if (!m || !m->total_bytes) return std::nullopt;
    total += *m->total_bytes;
  }
  return total;
}

// Why a step whose worker did not complete failed, in one line.
std::string failure_text(const BenchTrialSettings& s, const bench::BenchReport& r,
                         uint32_t concurrency, const std::optional<uint64_t>& cells) {
  if (r.error.starts_with(llama::k_no_kv_room)) {
    const uint64_t per_seq = sequence_kv_cells(s.input_len, s.output_len);
    return fmt::format(
        "the KV cache ran out: llama_decode found no free cell; {} sequences x {} cells = {} > "
        "the {} cells the engine has",
        concurrency, per_seq, uint64_t{concurrency} * per_seq,
        cells ? std::to_string(*cells) : "?");
  }
  if (r.status == "crashed") return r.error;
  return fmt::format("the engine failed: {}", r.error);
}

}  // namespace

uint64_t sequence_kv_cells(uint32_t input_len, uint32_t output_len) {
  return uint64_t{input_len} + std::max(1U, output_len) - 1;
}

std::optional<uint32_t> bench_estimated_start(const bench::BenchConfig& config,
                                              const model::ModelSpec& spec, bool has_gpu,
                                              uint32_t input_len, uint32_t output_len) {
  const uint32_t n_seq = config.parallel_from_user ? config.engine.n_seq_max : 1;
  const auto cells = bench::planned_kv_cells(config, spec, has_gpu, config.engine.n_ctx, n_seq);
  if (!cells) return std::nullopt;
  uint64_t c = *cells / std::max<uint64_t>(1, sequence_kv_cells(input_len, output_len));
  if (config.parallel_from_user) c = std::min<uint64_t>(c, config.engine.n_seq_max);
  return static_cast<uint32_t>(std::clamp<uint64_t>(c, 1, UINT32_MAX));
}

Trial make_bench_trial(BenchTrialSettings settings) {
  std::optional<uint64_t> gpu_total;
  if (settings.gpu != nullptr) gpu_total = gpu_total_bytes(*settings.gpu);
  return [s = std::move(settings), gpu_total](uint32_t concurrency,
                                              uint32_t step) -> Expected<TrialOutcome> {
    TrialOutcome o;
    o.concurrency = concurrency;
    o.n_requests = concurrency;
    const auto& user = s.config.engine;
    if (s.config.parallel_from_user && concurrency > user.n_seq_max) {
      // llama.cpp runs at most --parallel sequences; the others would wait for a slot.
      o.n_ok = concurrency;
      o.queued_requests = concurrency - user.n_seq_max;
      o.first_error = fmt::format("not run: --parallel is {}", user.n_seq_max);
      return o;
    }
    bench::BenchConfig config = s.config;
    config.concurrencies = {concurrency};
    config.prompt_tokens = {s.input_len};
    config.gen_tokens = s.output_len;
    config.mixed.reset();
    config.ctx_from_user = true;  // one context of -c cells: the engine decides what fits
    if (!config.parallel_from_user) config.engine.n_seq_max = concurrency;
    config.output_dir = s.output_dir;
    config.run_tag = fmt::format("step{:02}_c{}", step, concurrency);
    const auto on_event = [&](const bench::BenchReport&, const nlohmann::json& e) {
      if (!s.on_status) return;
      const std::string ev = e.value("ev", "");
      if (ev == "phase") s.on_status(fmt::format("engine: {}", e.value("name", "")));
      if (ev == "condition_start") {
        s.on_status(
            fmt::format("{} sequences of {} + {} tokens", concurrency, s.input_len, s.output_len));
      }
    };
    auto run = bench::run_bench(config, s.gpu, s.gpu_name, on_event);
    if (!run) return std::unexpected(run.error());
    const auto& r = *run;
    o.run_dir = r.run_dir;
    if (r.status == "refused") {
      return fail(ErrorKind::input,
                  fmt::format("llama.cpp refused the model or settings: {} (results kept in {})",
                              r.error, r.run_dir));
    }
    o.kv_capacity_tokens = engine_kv_cells(r);
    const bench::ConditionResult* c = r.conditions.empty() ? nullptr : &r.conditions.front();
    if (r.status == "interrupted") {
      o.interrupted = true;
      o.first_error = "interrupted";
    } else if (r.status != "completed" || c == nullptr) {
      o.first_error = failure_text(s, r, concurrency, o.kv_capacity_tokens);
    } else {
      // Every sequence was decoded with the others: nothing waited or was evicted.
      o.n_ok = std::min<uint64_t>(c->requests.size(), concurrency);
      o.preemptions = 0;
      o.peak_running = c->requests.size();
      o.peak_waiting = 0;
      std::vector<double> ttft, itl = c->step_ms;
      uint64_t cells_used = 0;
      for (const auto& q : c->requests) {
        ttft.push_back(q.ttft_ms);
        cells_used += sequence_kv_cells(q.prompt_tokens, q.output_tokens);
      }
      if (!ttft.empty()) o.ttft_p99_ms = client::percentiles(ttft).p99;
      if (!itl.empty()) o.itl_p99_ms = client::percentiles(itl).p99;
      if (o.kv_capacity_tokens && *o.kv_capacity_tokens > 0) {
        o.peak_kv_cache_usage =
            static_cast<double>(cells_used) / static_cast<double>(*o.kv_capacity_tokens);
      }
    }
    o.n_errors = o.n_requests - std::min(o.n_requests, o.n_ok);
    if (c != nullptr) {
      if (ran_on_gpu(r) && gpu_total && *gpu_total > 0 && c->peak_gpu_used_bytes) {
        o.memory_frac =
            static_cast<double>(*c->peak_gpu_used_bytes) / static_cast<double>(*gpu_total);
      } else if (s.host_total_bytes && *s.host_total_bytes > 0 && c->peak_rss_bytes) {
        o.memory_frac =
            static_cast<double>(*c->peak_rss_bytes) / static_cast<double>(*s.host_total_bytes);
      }
    }
    return o;
  };
}

}  // namespace kvprof::experiment
