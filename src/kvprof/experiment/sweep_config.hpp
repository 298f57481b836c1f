// The batch-profiling YAML that `kvprof sweep` reads: a list of `models`, each with the lengths
// and batch sizes to profile and the engine settings to serve it with (the keys of the batch
// profiler it replaces), plus kvprof's own `launch` / `endpoint` / `engine` / `gpu`. Every key at
// the top level other than `models` and the sweep settings is a default for every model.
// The parser checks the whole file and reports every problem with its line and column.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::experiment {

// Bounds on what a sweep file may hold (the file is outside data).
inline constexpr size_t k_max_config_bytes = 1 << 20;
inline constexpr size_t k_max_models = 256;
inline constexpr size_t k_max_list_items = 64;
inline constexpr size_t k_max_conditions_per_entry = 4096;  // input x output x batch
inline constexpr size_t k_max_string_chars = 4096;
inline constexpr size_t k_max_reported_errors = 100;

struct SourcePos {
  int line = 0;    // 1-based; 0 = unknown
  int column = 0;  // 1-based
};

struct ConfigIssue {
  SourcePos pos;
  std::string message;  // one line, e.g. "models[1].batch_sizes: expected a list of integers"
};

// One entry of `models`, with the top-level defaults applied.
struct ModelEntry {
  size_t index = 0;  // position in `models`
  SourcePos pos;     // of the entry
  SourcePos model_id_pos;
  SourcePos launch_pos;
  SourcePos gpu_pos;
  SourcePos engine_pos;  // line 0: `engine` not given (vLLM, or what `launch` starts)
  std::string model_id;  // catalog id, alias, config.json, folder or .gguf
  std::vector<uint32_t> input_lengths;
  std::vector<uint32_t> output_lengths;
  std::vector<uint32_t> batch_sizes;  // requests in flight
  std::string dtype = "auto";
  uint32_t tensor_parallel_size = 1;
  uint32_t pipeline_parallel_size = 1;
  std::string quantization;  // empty: none
  std::string kv_cache_dtype = "auto";
  std::optional<double> gpu_memory_utilization;
  std::optional<uint64_t> max_model_len;
  // The architecture, when given: checked against the model, or describes an unknown one.
  std::optional<double> model_params;
  std::optional<uint32_t> num_layers, num_heads, num_kv_heads, head_dim, hidden_size,
      intermediate_size, vocab_size;
  std::string container_name;  // a running container measured as its endpoint; empty: none
  // kvprof's own keys.
  std::string launch;    // server command with placeholders; empty: none
  std::string endpoint;  // a server already running; empty: none
  std::string engine = "vllm";
  std::string gpu;  // catalog GPU or "cpu" for the plan; empty: the one NVML sees, else H100
                    // (llama.cpp: the CPU)
};

// Sweep-wide settings (top level only).
struct SweepSettings {
  std::string name;  // folder name under <output>/sweeps/; default: the file's stem
  double baseline_s = 1.0;
  double post_warmup_s = 0.5;
  uint32_t warmup_requests = 2;
  uint32_t requests_per_condition = 1;  // x the batch size, so the batch is reached and held
  // A condition's requests are sent again until it lasts this long (profile --min-condition-s);
  // none: 1 s against a server, 0.2 s for the built-in simulator.
  std::optional<double> min_condition_s;
  double launch_timeout_s = 600;
  double launch_grace_s = 15;
};

struct SweepConfig {
  SweepSettings settings;
  std::vector<ModelEntry> models;
};

struct ConfigParse {
  SweepConfig config;
  std::vector<ConfigIssue> errors;    // every problem found (at most k_max_reported_errors)
  std::vector<ConfigIssue> warnings;  // keys accepted but not used
  size_t n_errors_dropped = 0;        // errors past the reporting bound
  [[nodiscard]] bool ok() const { return errors.empty(); }
};

// Parses and checks a sweep file's text: YAML syntax, types, ranges, unknown keys (with the
// closest known one), missing required keys. Never throws; the problems are in the result.
ConfigParse parse_sweep_config(std::string_view text);

// Reads `path` (at most k_max_config_bytes) and parses it; io / input error when unreadable.
Expected<ConfigParse> load_sweep_config(const std::filesystem::path& path);

// "FILE:LINE:COL: error: MESSAGE" (without the position when unknown).
std::string format_issue(const std::string& file, const ConfigIssue& issue,
                         std::string_view level = "error");

// The placeholders a `launch` command may use.
const std::vector<std::string>& launch_placeholders();

}  // namespace kvprof::experiment
