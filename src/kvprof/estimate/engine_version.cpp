// --engine-version across engines (see engine_version.hpp).
#include "kvprof/estimate/engine_version.hpp"

#include <fmt/format.h>

#include "kvprof/estimate/sglang_version.hpp"
#include "kvprof/estimate/vllm_version.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::estimate {
namespace {

// TensorRT-LLM's PyTorch backend, as read in its KV-cache creator: one rule since 1.0.
constexpr std::string_view k_trtllm_version = "1.x";

Expected<std::string> parse_trtllm_version(std::string_view text) {
  const std::string t = to_lower(trim(text));
  std::string_view v = t;
  if (!v.empty() && v.front() == 'v') v.remove_prefix(1);
  if (v.empty() || v == "latest" || v == "1" || v.starts_with("1.")) {
    return std::string(k_trtllm_version);
  }
  return fail(ErrorKind::usage,
              fmt::format("--engine-version '{}' is not a modelled TensorRT-LLM release; "
                          "supported: 1.x (the PyTorch backend of trtllm-serve, 1.0 and later)",
                          text));
}

}  // namespace

Expected<std::string> parse_engine_version(engines::Engine engine, std::string_view text) {
  switch (engine) {
    case engines::Engine::vllm: {
      auto r = parse_vllm_version(text);
      if (!r) return std::unexpected(r.error());
      return std::string((*r)->name);
    }
    case engines::Engine::sglang: {
      auto r = parse_sglang_version(text);
      if (!r) return std::unexpected(r.error());
      return std::string((*r)->name);
    }
    case engines::Engine::trtllm:
      return parse_trtllm_version(text);
    case engines::Engine::llamacpp:
    case engines::Engine::hf:
    case engines::Engine::tgi:
    case engines::Engine::unknown:
      break;
  }
  if (trim(text).empty()) return std::string();
  return fail(ErrorKind::usage, fmt::format("--engine-version applies to --engine vllm, sglang and "
                                            "trtllm; kvprof models {} without versions",
                                            engines::engine_name(engine)));
}

std::string modelled_engine_version(const EngineSettings& s) {
  if (!engines::engine_row(s.engine).releases_modelled) return "(no version pinned)";
  auto v = parse_engine_version(s.engine, s.engine_version);
  if (v) return *v;
  return s.engine == engines::Engine::vllm     ? std::string(vllm_default_version().name)
         : s.engine == engines::Engine::sglang ? std::string(sglang_latest_version().name)
                                               : std::string(k_trtllm_version);
}

std::string engine_versions_help() {
  return fmt::format(
      "Release whose memory rules to follow (default: vLLM v0.19, the newest checked against "
      "public startups; SGLang and TensorRT-LLM: the newest modelled). vLLM: {}. SGLang: {}. "
      "TensorRT-LLM: 1.x. A patch release (v0.7.3, 0.4.7.post1) takes the rules of the row that "
      "covers it",
      vllm_supported_versions(), sglang_supported_versions());
}

}  // namespace kvprof::estimate
