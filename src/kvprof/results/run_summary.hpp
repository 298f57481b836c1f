// A run's summary, typed: one shape for a profile run (GPU memory at three capture points, the
// measured breakdown, the engine's own figures, the estimate it was compared with, per-condition
// latency) and a bench run (host memory of the in-process engine). This file and run_summary.cpp
// are the one place that knows summary.json's keys and their documented aliases on the reading
// side; compare, validate and the reports read this struct. Every size is bounded; a field that
// is missing or of the wrong type is simply absent.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kvprof/util/error.hpp"

namespace kvprof::results {

// summary.json and manifest.json are read up to this size.
inline constexpr size_t k_max_run_document_bytes = size_t{64} << 20;

// The memory components in the order they are shown.
inline constexpr std::string_view k_components[] = {"weights", "kv_cache", "activations",
                                                    "overhead", "total"};

struct MeasuredComponent {
  std::optional<uint64_t> bytes;
  std::string confidence;  // "high", "medium", "low", "none", "reported by engine"
  std::string method;
};

struct GpuMemory {
  unsigned gpu = 0;
  std::string name;
  std::optional<uint64_t> baseline_bytes, post_warmup_bytes, peak_bytes;
};

// The GPUs of one node of a multi-node job, as the sampler kvprof ran there recorded them
// (summary.json's `nodes`): baseline_bytes is the first reading, peak_bytes the highest.
struct NodeMemory {
  std::string node;
  std::string trace;  // its GPU trace, relative to the run folder
  std::vector<GpuMemory> gpus;
};

struct ConditionSummary {
  std::string id;
  uint32_t concurrency = 0;
  uint64_t n_ok = 0, n_errors = 0;
  double ttft_p50_ms = 0, ttft_p99_ms = 0, itl_p50_ms = 0, itl_p99_ms = 0, e2e_p50_ms = 0,
         e2e_p99_ms = 0;
  std::optional<double> e2e_mean_ms;
  double output_tokens_per_s = 0;
  std::optional<uint64_t> peak_used_bytes;    // a profile's GPU peak; a bench's peak RSS
  std::optional<uint64_t> peak_rss_bytes;     // the server's (profile) or engine's (bench)
  std::optional<double> peak_kv_cache_usage;  // 0..1, from the server's metrics
  std::optional<uint64_t> preemptions;
  bool completed = true;  // false: stopped by Ctrl-C while it ran
};

struct RunSummary {
  std::string id;
  std::filesystem::path dir;
  std::string kind;    // "profile" or "bench"
  std::string memory;  // what was sampled: "GPU" or "host RSS"
  std::string model;
  std::string engine;
  // The engine's release as the run saw it: the server's /version, llama.cpp's own version and the
  // release its package was built from ("0.5.0-dev, ggml-org/llama.cpp v0.5.0"); empty: unknown.
  std::string engine_version;
  bool simulated = false;
  bool interrupted = false;  // stopped by Ctrl-C or a signal before its grid ended
  // "completed", "partial" (some requests failed), "interrupted", "failed" (nothing answered,
  // or the engine crashed), "refused" (bench: the engine would not load the model).
  std::string status;
  std::string error;          // why a bench run failed or was refused
  std::string memory_source;  // "nvml", "dcgm", "none (...)", ...
  std::string endpoint;       // the server's URL (secrets redacted); empty for bench
  double started_unix_s = 0, duration_s = 0;
  // Settings as flat "name" -> value text: the configuration the run was started with, and each
  // flag of a launched server's command ("launch --max-num-seqs" -> "64", a lone flag -> "true").
  std::map<std::string, std::string> settings;
  std::string launch_command;
  std::string estimate_flags;
  // Sums over the GPUs sampled (bench: the engine process's RSS before load and at its peak).
  std::optional<uint64_t> baseline_bytes, post_warmup_bytes, peak_bytes;
  std::vector<GpuMemory> gpus;
  std::map<std::string, MeasuredComponent> measured;  // k_components, the busiest GPU
  std::map<std::string, uint64_t> reported;  // the engine's: weights, kv_cache, cuda_graph, ...
  std::optional<uint64_t> cuda_graphs;       // captured, from the engine's log (0 when eager)
  std::optional<uint64_t> num_gpu_blocks, kv_cache_tokens;
  std::map<std::string, double> estimated;  // the estimate the run recorded, k_components
  std::vector<ConditionSummary> conditions;
  uint64_t n_requests = 0, n_ok = 0, n_errors = 0;
  double tokens_per_s = 0;
  std::optional<uint64_t> host_peak_rss_bytes;
  std::vector<NodeMemory> nodes;  // every node of a multi-node job; empty otherwise

  // The name of the first GPU sampled, "none (CPU)" for a run that sampled host memory only.
  [[nodiscard]] std::string gpu_name() const;
};

// "completed", "partial", "interrupted" or "failed" from the request totals of a run.
std::string run_status(bool interrupted, uint64_t n_requests, uint64_t n_ok, uint64_t n_errors);

// Reads a run from its summary.json and manifest.json texts (manifest may be empty); `dir` is
// recorded as given. An input error when the summary is not a kvprof run summary.
Expected<RunSummary> parse_run_summary(std::string_view summary_text,
                                       std::string_view manifest_text,
                                       const std::filesystem::path& dir);

// The same from the parsed documents (manifest may be null).
Expected<RunSummary> read_run_summary(const nlohmann::json& summary, const nlohmann::json& manifest,
                                      const std::filesystem::path& dir);

// The flags of a shell command as settings: "--name value" -> {"--name", "value"}, a flag
// followed by another flag or nothing -> "true", "--name=value" split; the program's base name
// under "program". Host and port flags are left out (they differ between any two launches).
std::map<std::string, std::string> command_flags(std::string_view command);

}  // namespace kvprof::results
