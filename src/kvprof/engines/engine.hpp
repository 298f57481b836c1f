// Which serving engine: one identity for the planner, the startup-log readers and the /metrics
// readers, and one row of facts per engine (its names, and what kvprof models of it). A new engine
// is a new value and a new row here; the code asks the row, never compares names itself.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "kvprof/util/error.hpp"

namespace kvprof::engines {

enum class Engine : uint8_t { unknown, vllm, sglang, trtllm, llamacpp, hf, tgi };

// What kvprof knows of one engine.
struct EngineRow {
  Engine id = Engine::unknown;
  std::string_view name;          // "vllm": flags, JSON, file names
  std::string_view display_name;  // "vLLM": prose
  std::span<const std::string_view> aliases;  // other spellings people use ("llama.cpp")
  bool planned = false;            // `estimate --engine` plans it
  bool releases_modelled = false;  // `--engine-version` picks a release's rules
  bool startup_log_read = false;   // `parse-log` reads its startup lines
  std::string_view metrics_prefix;  // its /metrics families start so ("vllm:"); "" = none read
  // Its own flags for tensor and pipeline parallelism ("" = it has none).
  std::string_view tensor_parallel_flag;
  std::string_view pipeline_parallel_flag;
};

// Every engine's row, unknown first.
std::span<const EngineRow> engine_rows();

// The row of `engine`.
const EngineRow& engine_row(Engine engine);

// "vllm", "sglang", "trtllm", "llamacpp", "hf", "tgi"; "unknown" for unknown.
std::string_view engine_name(Engine engine);

// The engine named `text` (a name or an alias, any case, spaces trimmed); nullopt when none is.
std::optional<Engine> find_engine(std::string_view text);

// The engine `estimate --engine` takes from `text`; a usage error naming the planned engines.
Expected<Engine> parse_planned_engine(std::string_view text);

}  // namespace kvprof::engines
