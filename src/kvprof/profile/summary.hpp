// What a profile run found, as summary.json (schema_version "2.0": sizes in `_bytes` and `_gib`,
// the predecessor's `_gb` names kept as aliases of `_gib` where its layout had them; every field in
// docs/summary-schema.md) and as the terminal table printed at the end.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/client/stats.hpp"
#include "kvprof/client/transport.hpp"
#include "kvprof/enginelog/log_report.hpp"
#include "kvprof/gpu/memory_source.hpp"
#include "kvprof/gpu/sampler.hpp"
#include "kvprof/metrics/scraper.hpp"
#include "kvprof/profile/breakdown.hpp"
#include "kvprof/profile/condition_metrics.hpp"
#include "kvprof/profile/derived.hpp"
#include "kvprof/profile/timeline.hpp"

namespace kvprof::profile {

inline constexpr int k_summary_schema_version = 2;

// What the server says about itself.
// What a llama.cpp server's /props states (server_answers.hpp reads it).
struct PropsFacts {
  std::string build;
  std::optional<enginelog::EngineLogReport> buffers;  // kvprof serve's own buffers
  std::string model_path;                             // "model_path", at most 4096 bytes
  std::optional<uint32_t> total_slots;                // "total_slots", 1 to 4096
  std::optional<uint64_t> slot_context_tokens;        // default_generation_settings.n_ctx
  std::optional<uint64_t> context_tokens;  // all the cells ("kvprof.n_ctx": kvprof serve only)
};

struct ServerInfo {
  std::string base_url;             // as given
  std::vector<std::string> models;  // /v1/models ids
  long models_status = 0;           // the HTTP status of GET /v1/models
  std::string version;              // /version "version", empty when not served
  std::string owned_by;             // of the first model
  bool simulated = false;           // kvprof serve-sim
  // "max_model_len" of each model in /v1/models, when listed (vLLM, SGLang, serve-sim).
  std::map<std::string, uint64_t> max_model_len_tokens;
  // "meta": {"n_vocab"} of each model in /v1/models, when listed (llama-server, kvprof serve).
  std::map<std::string, uint64_t> vocab_tokens;
  // What llama.cpp's /props says (its buffers: kvprof serve only); absent when it does not answer.
  std::optional<PropsFacts> props;
};

struct ConditionReport {
  client::ConditionStats requests;
  Window window;
  std::vector<GpuWindowStats> memory;  // per GPU over the condition
  MetricsWindowStats server;
  ConditionKv kv;                          // per-request KV and sample counts (assess_conditions)
  std::optional<uint64_t> peak_rss_bytes;  // the server process's host memory (none: not sampled)
};

struct ProfileReport {
  std::string run_id;
  std::string run_dir;
  double started_unix_s = 0;
  double ended_unix_s = 0;
  bool interrupted = false;
  bool simulated = false;
  std::string endpoint;
  std::string model;
  ServerInfo server;
  std::string engine_type = "unknown";  // from the /metrics names
  std::string memory_source = "none";   // "nvml", "dcgm", "prometheus", "simulated" or "none"
  std::vector<gpu::DeviceInfo> gpus;
  CapturePoint baseline, post_warmup, peak;
  std::vector<ConditionReport> conditions;  // those started; an interrupted run's last is partial
  uint64_t n_planned_requests = 0;          // in the workload (0: not known)
  MetricsWindowStats server_during_load;
  std::optional<MeasuredBreakdown> breakdown;
  std::vector<ComparisonRow> comparison;  // empty without an estimate
  DerivedAnswers derived;                 // conditions index-aligned with `conditions`
  std::string estimate_flags;
  std::optional<gpu::HostPeak> host;
  // The server's RSS at the three capture points (the most in each window): baseline,
  // post_warmup, peak; empty when its host memory was not sampled.
  std::vector<std::pair<std::string, HostPoint>> host_captures;
  gpu::SamplerStats sampler;
  nlohmann::json gpu_gaps;  // fill_memory_gaps (run_steps.hpp) when GPU memory was sampled
  metrics::ScraperStats scraper;
  ScrapePlan scrape_plan;
  uint64_t max_in_flight = 0;
  client::TransportCounters transport;  // the measured run's reads
  std::vector<std::string> warnings;
  std::map<std::string, std::string> files;  // role -> file name in the run directory
  nlohmann::json launch;           // launch_json (startup.hpp) of a launched server, else null
  nlohmann::json engine_reported;  // engine_reported_json (startup.hpp) when a log was read

  // The built-in simulator's sizing and engine jitter, else null.
  nlohmann::json simulation_details;
  // What the estimate assumed (estimate_check.hpp), and one line per component beyond 10%.
  nlohmann::json estimate_assumptions;
  std::vector<std::string> estimate_diagnosis;
};

// Request totals over all conditions.
struct RequestTotals {
  uint64_t n_requests = 0, n_ok = 0, n_errors = 0, n_cancelled = 0, output_tokens = 0;
  uint64_t n_repeated = 0;                 // of n_requests, repeats sent to fill --min-condition-s
  uint64_t n_planned = 0, n_not_sent = 0;  // the workload's; the planned that were never sent
  std::map<std::string, uint64_t> errors_by_kind;
};
RequestTotals request_totals(const ProfileReport& report);

// "A of B requests sent completed, C failed, D cancelled; E of the F planned not sent" (sent
// counts repeats, planned does not: the two are never set against each other).
std::string request_totals_text(const RequestTotals& totals);

// summary.json.
nlohmann::json summary_json(const ProfileReport& report);

// The terminal summary: per-condition table, three-point capture, breakdown (and comparison).
std::string summary_text(const ProfileReport& report);

}  // namespace kvprof::profile
