// The plan of a sweep: each model entry becomes one configuration (one server setting, one profile
// run over its input x output x batch grid) with the planner's estimate, whether it fits and why
// not, the conditions the KV cache cannot hold at once, and the time it should take.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/estimate/estimate.hpp"
#include "kvprof/experiment/sweep_config.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::experiment {

// How the plan times a run: the server's start (with `launch`) and the roofline fractions.
inline constexpr double k_assumed_startup_s = 60.0;
inline constexpr double k_assumed_cpu_startup_s = 5.0;  // a CPU server maps its model: seconds
inline constexpr double k_bandwidth_fraction = 0.6;     // of peak memory bandwidth, decode
inline constexpr double k_flops_fraction = 0.4;         // of peak bf16 TFLOP/s, prefill
inline constexpr double k_sim_tokens_per_s = 500.0;     // the built-in simulator's decode speed

enum class ServerKind { launch, endpoint, simulator };
std::string_view server_kind_name(ServerKind kind);  // "launch", "endpoint", "built-in simulator"

// How long each condition of `server` lasts at least (the sweep's min_condition_s, else the
// profile's default: 1 s against a server, 0.2 s for the built-in simulator).
double min_condition_s(const SweepSettings& settings, ServerKind server);

struct PlannedCondition {
  uint32_t input_len = 0, output_len = 0, batch_size = 0;
  uint64_t kv_needed_bytes = 0;    // per GPU, the whole batch at full length
  uint64_t kv_capacity_bytes = 0;  // per GPU
  bool fits = true;                // the cache holds the whole batch at once
  bool refused = false;            // the server refuses its requests (longer than it takes)
  std::string note;                // why not, or a length over max_model_len
  double expected_s = 0;
};

struct PlannedConfig {
  ModelEntry entry;
  std::string id;           // "02_llama-3.1-8b-instruct": position and model, for files and runs
  std::string fingerprint;  // 16 hex digits of the settings that decide the measurement
  std::string label;        // one line for tables: model and the settings given
  std::string gpu;          // catalog GPU the plan used, or "cpu"
  std::string engine;       // the engine planned: the YAML's, or what `launch` starts
  // The launched server names its model (it serves a GGUF file: llama-server calls it by its
  // alias or file name); requests use that name, not model_id.
  bool server_names_model = false;
  ServerKind server = ServerKind::simulator;
  workload::GridOptions
      grid;  // what runs: input lengths whose requests the server refuses left out
  uint64_t n_requests = 0;
  std::optional<estimate::Estimate> estimate;
  bool fits = true;    // false: the plan says it cannot run (reason says why)
  std::string reason;  // one line
  std::vector<std::string> notes;
  std::vector<PlannedCondition> conditions;  // input x output x batch, the grid's order
  double expected_s = 0;
};

struct Plan {
  std::string name;
  std::vector<PlannedConfig> configs;
  uint64_t n_conditions = 0, n_requests = 0;
  double expected_s = 0;  // of the configurations that will run
};

struct PlanOptions {
  std::optional<std::string> gpu_found;  // NVML's name of the first GPU here; none: no GPU
  std::string fallback_gpu = "H100";     // for a GPU engine without `gpu` and no catalog GPU here
};

// Plans every entry of `config`. Problems that belong to the file (a model that is neither known
// nor described, the simulator asked to play another engine) are added to `errors` with the
// entry's line; a configuration the planner cannot fit stays in the plan with fits = false.
Plan plan_sweep(const SweepConfig& config, const PlanOptions& options,
                std::vector<ConfigIssue>& errors);

// An entry's `launch` with its placeholders filled: the model, `host`:`port`, `gpu`, the
// largest batch and the entry's settings ({engine_args}: vLLM's flags for them), each value one
// shell word. A usage error for a value the shell cannot be given (a control character).
Expected<std::string> launch_command(const ModelEntry& e, const std::string& gpu,
                                     const std::string& host, uint16_t port);

// "1h 02m", "3m 10s", "12.3 s".
std::string format_duration(double seconds);

}  // namespace kvprof::experiment
