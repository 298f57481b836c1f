// Ollama, as the engine registry (engines/registry.hpp) calls it: llama.cpp's plan under the
// settings Ollama gives the llama.cpp it bundles (its context, parallel slots, flash attention
// and KV cache type defaults, its batch, the layers its own estimate offloads), the lines Ollama
// logs about that estimate, and where the estimate (what `ollama ps` shows) differs from what
// llama.cpp allocates. Its releases are in releases.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "kvprof/enginelog/line_reader.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::engines {

// An Ollama release and what comes with it.
struct OllamaRelease {
  std::array<uint32_t, 3> version{};  // {0, 5, 4}
  uint32_t llamacpp_build = 0;        // the llama.cpp it bundles (bNNNN)

  // "v0.5.4".
  [[nodiscard]] std::string name() const;
  // True from release {major, minor, patch} on.
  [[nodiscard]] bool at_least(uint32_t major, uint32_t minor, uint32_t patch) const;
};

// The Ollama release `text` names ("v0.5.4", "0.5.4"; "" or "latest": the newest modelled) with
// the llama.cpp it bundles; a usage error for one before v0.1.45 (another estimate) or not a
// version.
Expected<OllamaRelease> parse_ollama_release(std::string_view text);

// The modelled range, for --help: "v0.1.45 - v0.32.15".
std::string ollama_supported_releases();

// The canonical name of the release `text` names (the registry's parse_release).
Expected<std::string> parse_ollama_release_name(std::string_view text);

// Ollama's deployment of `input` on the release its settings name: the llama.cpp buffers per
// device under Ollama's settings, with Ollama's estimate and its log lines.
Expected<estimate::Estimate> estimate_ollama(const estimate::EstimateInput& input);

// The reader of Ollama's server log: its version and its own lines, then the lines of the
// llama.cpp runner it starts (read as llama.cpp's reader reads them).
enginelog::LineReader ollama_log_reader();

}  // namespace kvprof::engines
