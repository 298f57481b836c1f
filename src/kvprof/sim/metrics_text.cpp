// Prometheus text rendering of the simulator's engine state with vLLM V1 names.
#include "kvprof/sim/metrics_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kvprof::sim {

namespace {

// Escapes a label value: backslash, double quote, newline.
std::string escape_label(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

class Page {
 public:
  explicit Page(const std::string& model)
      : m_labels(fmt::format("engine=\"0\",model_name=\"{}\"", escape_label(model))) {}

  void header(std::string_view name, std::string_view type, std::string_view help) {
    m_out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(std::string_view name, double value) {
    m_out += fmt::format("{}{{{}}} {}\n", name, m_labels, prom_number(value));
  }
  void gauge(std::string_view name, std::string_view help, double value) {
    header(name, "gauge", help);
    sample(name, value);
  }
  void counter(std::string_view name, std::string_view help, double value) {
    header(name, "counter", help);
    sample(name, value);
  }
  std::string& out() { return m_out; }
  [[nodiscard]] const std::string& labels() const { return m_labels; }

 private:
  std::string m_labels;
  std::string m_out;
};

}  // namespace

std::string prom_number(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  if (value == std::floor(value) && std::fabs(value) < 1e15) return fmt::format("{:.1f}", value);
  return fmt::format("{}", value);
}

std::string render_metrics(const SimConfig& config, const EngineStats& s) {
  Page p(config.model);
  p.gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
          s.num_running);
  p.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
          s.num_waiting);
  p.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
          s.kv_cache_usage());
  p.counter("vllm:prefix_cache_queries_total",
            "Prefix cache queries, in terms of number of queried tokens.",
            static_cast<double>(s.prefix_cache_queries_total));
  p.counter("vllm:prefix_cache_hits_total",
            "Prefix cache hits, in terms of number of cached tokens.",
            static_cast<double>(s.prefix_cache_hits_total));
  p.counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.",
            static_cast<double>(s.num_preemptions_total));
  p.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.",
            static_cast<double>(s.prompt_tokens_total));
  p.counter("vllm:generation_tokens_total", "Number of generation tokens processed.",
            static_cast<double>(s.generation_tokens_total));

  p.header("vllm:request_success_total", "counter", "Count of successfully processed requests.");
  for (const char* reason : {"stop", "length", "abort"}) {
    const double n =
        std::string_view(reason) == "length"  ? static_cast<double>(s.requests_finished_total)
        : std::string_view(reason) == "abort" ? static_cast<double>(s.requests_aborted_total)
                                              : 0.0;
    p.out() += fmt::format(
        "vllm:request_success_total{{engine=\"0\",finished_reason=\"{}\",model_name=\"{}\"}} {}\n",
        reason, escape_label(config.model), prom_number(n));
  }

  p.header("vllm:time_to_first_token_seconds", "histogram",
           "Histogram of time to first token in seconds.");
  uint64_t cumulative = 0;
  const std::string model = escape_label(config.model);
  for (size_t i = 0; i <= k_num_ttft_buckets; ++i) {
    cumulative += s.ttft_bucket_counts[i];
    const std::string le = i < k_num_ttft_buckets ? prom_number(k_ttft_buckets_s[i]) : "+Inf";
    p.out() += fmt::format(
        "vllm:time_to_first_token_seconds_bucket{{engine=\"0\",le=\"{}\",model_name=\"{}\"}} {}\n",
        le, model, prom_number(static_cast<double>(cumulative)));
  }
  p.sample("vllm:time_to_first_token_seconds_count", static_cast<double>(s.ttft_count));
  p.sample("vllm:time_to_first_token_seconds_sum", s.ttft_sum_s);

  // Info gauge: labels are the cache config (sorted), like vLLM's log_metrics_info.
  p.header("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig");
  p.out() += fmt::format(
      "vllm:cache_config_info{{block_size=\"{}\",cache_dtype=\"auto\",enable_prefix_caching=\"{}\","
      "engine=\"0\",num_gpu_blocks=\"{}\",simulated=\"1\"}} 1.0\n",
      config.block_size, config.enable_prefix_caching ? "True" : "False", config.num_gpu_blocks);
  return std::move(p.out());
}

std::string render_dcgm_metrics(const SimConfig& config, const EngineStats& stats) {
  constexpr uint64_t k_mib = 1ULL << 20;
  const uint64_t used = std::min(
      config.total_bytes, sim_used_bytes(config, stats.num_used_blocks, stats.last_step_tokens));
  const uint64_t reserved = std::min(config.reserved_bytes, config.total_bytes - used);
  const uint64_t free = config.total_bytes - used - reserved;
  const std::string labels = fmt::format(
      R"({{gpu="0",UUID="GPU-5a1e0000-0000-4000-8000-000000000000",pci_bus_id="00000000:00:00.0",)"
      R"(device="nvidia0",modelName="{}",Hostname="{}"}})",
      config.gpu_name, config.dcgm_hostname);
  std::string out;
  const auto gauge = [&](const char* name, const char* help, uint64_t bytes) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n{0}{2} {3}\n", name, help, labels,
                       bytes / k_mib);
  };
  gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", free);
  gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", used);
  gauge("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", reserved);
  return out;
}

}  // namespace kvprof::sim
