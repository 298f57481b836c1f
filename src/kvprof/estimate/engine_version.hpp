// --engine-version for every engine: which modelled release of vLLM (vllm_version.hpp), SGLang
// (sglang_version.hpp) or TensorRT-LLM a plan follows, and the name outputs give it.
#pragma once

#include <string>
#include <string_view>

#include "kvprof/estimate/settings.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::estimate {

// The canonical name of the modelled release of `engine` that `text` names ("" or "latest": the
// newest). A usage error naming the supported releases for one not modelled, or for an engine
// kvprof models without versions (llama.cpp, HF transformers).
Expected<std::string> parse_engine_version(engines::Engine engine, std::string_view text);

// The release whose memory rules the planner follows for `s` ("v0.19" for vLLM unless
// --engine-version chose another); "(no version pinned)" for engines without versions.
std::string modelled_engine_version(const EngineSettings& s);

// "0.6, 0.7, ... or latest" for --help.
std::string engine_versions_help();

}  // namespace kvprof::estimate
