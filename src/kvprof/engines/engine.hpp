// Which serving engine: one identity for the planner, the startup-log readers and the /metrics
// readers, and one row of facts per engine that lower layers read (its names, its /metrics
// prefix, its parallelism flags). What kvprof does with an engine is its row of functions in
// registry.hpp, above the planner; the code asks the rows, never compares names itself.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "kvprof/util/error.hpp"

namespace kvprof::engines {

enum class Engine : uint8_t { unknown, vllm, sglang, trtllm, llamacpp, hf, tgi, ollama };

// How an engine holds its KV cache.
enum class KvAllocation : uint8_t {
  paged_pool,  // a pool of blocks allocated at start; past it requests queue (vLLM, SGLang,
               // TRT-LLM)
  cells,       // -c cells allocated at start; past them a request does not fit (llama.cpp)
  grows,       // grows with the workload until memory runs out (HF transformers)
};

// What kvprof knows of one engine.
struct EngineRow {
  Engine id = Engine::unknown;
  std::string_view name;                      // "vllm": flags, JSON, file names
  std::string_view display_name;              // "vLLM": prose
  std::span<const std::string_view> aliases;  // other spellings people use ("llama.cpp")
  std::string_view metrics_prefix;  // its /metrics families start so ("vllm:"); "" = none read
  // Its own flags for tensor and pipeline parallelism ("" = it has none).
  std::string_view tensor_parallel_flag;
  std::string_view pipeline_parallel_flag;
  KvAllocation kv_allocation = KvAllocation::grows;
  bool plan_counts_cuda_graphs = false;  // its plan counts the CUDA graphs it captures
  // Its server's port when not told one (as its container image starts it); 0 = no server.
  uint16_t server_port = 0;
  // Words that name it in container image names ("vllm/vllm-openai:v0.6.3").
  std::span<const std::string_view> image_words;
};

// Every engine's row, unknown first.
std::span<const EngineRow> engine_rows();

// The row of `engine`.
const EngineRow& engine_row(Engine engine);

// "vllm", "sglang", "trtllm", "llamacpp", "hf", "tgi", "ollama"; "unknown" for unknown.
std::string_view engine_name(Engine engine);

// The engine named `text` (a name or an alias, any case, spaces trimmed); nullopt when none is.
std::optional<Engine> find_engine(std::string_view text);

// The engine a container image runs, by its name ("lmsysorg/sglang:v0.4.6" -> sglang, any case);
// nullopt when no engine's image words are in it.
std::optional<Engine> engine_of_image(std::string_view image);

}  // namespace kvprof::engines
