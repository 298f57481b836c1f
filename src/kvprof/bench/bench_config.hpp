// What `kvprof bench` runs: the engine settings (llama.cpp's flags), the grid of conditions
// (prompt length x concurrency, or a short/long mix) and where the results go.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/engines/assumptions.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/llama/engine.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::bench {

// --estimate-with FLAGS: the run is compared with the plan for these llama.cpp flags (on the run's
// model unless they name another) instead of the run's own settings.
struct EstimateWith {
  std::string flags;  // as the user gave them
  // The planner's input for the flags, once the run knows whether libllama has a GPU; fills in
  // where the plan's GPU and settings came from. Usage error for flags that do not parse.
  std::function<Expected<estimate::EstimateInput>(bool has_gpu,
                                                  engines::AssumptionSources& sources)>
      make_input;
};

struct BenchConfig {
  llama::LlamaSettings engine;     // model path and llama.cpp settings
  llama::LlamaLibOptions library;  // where libllama is
  std::vector<uint32_t> concurrencies = {1, 2, 4, 8};
  std::vector<uint32_t> prompt_tokens = {128};  // --prompt-toks (one list entry per sweep point)
  uint32_t gen_tokens = 32;                     // --gen-toks
  // --mixed SHORT,LONG: at each concurrency half the requests (rounded up) are short, half long.
  std::optional<std::pair<uint32_t, uint32_t>> mixed;
  uint64_t seed = 42;  // prompt token ids
  std::filesystem::path output_dir = "results";
  std::string run_tag;
  std::string model_label;  // what the user passed as --model
  bool ctx_from_user = false;
  bool parallel_from_user = false;
  std::optional<EstimateWith> estimate_with;  // --estimate-with
  std::string gpu_name;                       // the GPU NVML names; empty without one
  // Without -c and -np each condition gets its own context sized for it (-np = its concurrency,
  // -c = its tokens rounded up to 256), as a server sized for that load would: memory then
  // shows what each concurrency costs. With either flag one context serves every condition.
  [[nodiscard]] bool context_per_condition() const { return !ctx_from_user && !parallel_from_user; }
};

// The engine settings for `condition`: the configured ones, or sized for it (see above).
llama::LlamaSettings settings_for(const BenchConfig& config, const struct BenchCondition& c);

// One condition: the prompt length of each sequence run together.
struct BenchCondition {
  uint32_t index = 0;
  uint32_t concurrency = 0;
  std::vector<uint32_t> prompt_tokens;  // one per sequence
  uint32_t gen_tokens = 0;
  std::string label;  // "c4 p128" or "c4 mixed 64/512"
  // Tokens the condition holds in the KV cache at its end.
  [[nodiscard]] uint64_t kv_tokens() const;
};

// The grid in run order (prompt length outer, concurrency inner).
std::vector<BenchCondition> make_conditions(const BenchConfig& config);

// Fills what the user left to kvprof: -np = the largest concurrency, -c = the most tokens any
// condition holds (rounded up to 256); usage error when a condition cannot fit in the context
// or runs more sequences than -np.
Expected<void> resolve_defaults(BenchConfig& config);

}  // namespace kvprof::bench
