// What kvprof does with each engine, one row per engine, and the front doors that pick the row:
// plan a deployment, read the release it names, read its startup log, read its /metrics. Each
// function of a row is that engine's own (engines/<name>/); a null one is something kvprof does
// not do for that engine. A new engine is a folder engines/<name>/, a row here and its identity
// row in engine.cpp; nothing else branches on the engine.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/engine.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/estimate/launch_reading.hpp"
#include "kvprof/metrics/prometheus.hpp"
#include "kvprof/metrics/snapshot.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::engines {

struct EngineFunctions {
  Engine id = Engine::unknown;
  // Its memory plan (`estimate --engine`).
  Expected<estimate::Estimate> (*plan)(const estimate::EstimateInput& input) = nullptr;
  // The canonical name of the modelled release `text` names ("" = the default); null: kvprof
  // follows one rule for every release.
  Expected<std::string> (*parse_release)(std::string_view text) = nullptr;
  // A fresh reader of its startup lines (`parse-log`, the engine-reported figures of a profile).
  enginelog::LineReader (*log_reader)() = nullptr;
  // Its own /metrics families into a snapshot.
  void (*read_metrics)(const metrics::Exposition& exposition,
                       metrics::MetricsSnapshot& snapshot) = nullptr;
  // Reads its server's command (`words` from the program on) into a deployment; false when the
  // program is not its server.
  bool (*read_command)(std::span<const std::string> words, estimate::LaunchReading& out) = nullptr;
};

// The row of `engine`; every function is null for unknown.
const EngineFunctions& engine_functions(Engine engine);

// The engine `estimate --engine` plans, from `text` (a name or an alias); a usage error naming
// the planned engines.
Expected<Engine> parse_planned_engine(std::string_view text);

// Plans per-GPU memory for `input` with the engine it names. Returns a usage error for an engine
// kvprof does not plan and for impossible settings (TP not dividing the heads, utilization out of
// range, context longer than the model allows), an input error when the model lacks what the
// engine needs. What reading the model found (model.warnings) leads the warnings.
Expected<estimate::Estimate> plan(const estimate::EstimateInput& input);

// The canonical name of the modelled release of `engine` that `text` names ("" or "latest": the
// newest). A usage error naming the supported releases for one not modelled, or for an engine
// kvprof models without versions (llama.cpp, HF transformers).
Expected<std::string> parse_engine_version(Engine engine, std::string_view text);

// The release whose memory rules the planner follows for `s` ("v0.19" for vLLM unless
// --engine-version chose another); "(no version pinned)" for engines without versions.
std::string modelled_engine_version(const estimate::EngineSettings& s);

// The text of --engine-version in --help: the default and every engine's modelled releases.
std::string engine_versions_help();

// Options that read every engine's startup lines, or only `engine`'s (unknown: detect it).
enginelog::ParseOptions log_parse_options(Engine engine = Engine::unknown);

// The names of the engines whose startup logs kvprof reads ("llamacpp", "vllm", ...).
std::vector<std::string_view> log_read_engine_names();

// What the server command `command` (--launch, a sweep's launch) starts: the first program in it
// that an engine reads (after env assignments, wrappers such as `env` or `timeout`, and `cd … &&`),
// with the model and the settings its flags state over `base`. None when no engine's server is
// in it or the command does not split into words (an unclosed quote, over the bounds).
std::optional<estimate::LaunchReading> read_launch_command(
    std::string_view command, const estimate::EngineSettings& base = {});

// The canonical snapshot of a /metrics scrape: the engine metrics::guess_engine names, its own
// families read by its row (counts summed over label sets, fractions averaged, NaN ignored), a KV
// share over 100% not believed.
metrics::MetricsSnapshot read_metrics(const metrics::Exposition& exposition);

}  // namespace kvprof::engines
