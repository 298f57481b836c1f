// The per-engine line parsers behind EngineLogParser: each reads one line, adds what it
// recognises to the report and returns true, or returns false and changes nothing.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "kvprof/enginelog/report.hpp"

namespace kvprof::enginelog::detail {

// One line of the log: 1-based number and text (ANSI colours removed, no newline).
struct LineInput {
  uint64_t line_no = 0;
  std::string_view text;
};

// Returns the LineRef of `in` (copies the text).
inline LineRef ref(const LineInput& in) {
  return LineRef{in.line_no, std::string(in.text)};
}

// Adds a figure of `component` on `device`, printed in line `in`.
inline void add_figure(EngineLogReport& report, const LineInput& in, Component component,
                       std::string device, PrintedSize size) {
  MemoryFigure f;
  f.component = component;
  f.device = std::move(device);
  f.size = std::move(size);
  f.source = ref(in);
  report.figures.push_back(std::move(f));
}

// Adds the size printed after `key` in line `in` ("GB" read as GiB) as a figure; false when the
// line has no such size.
bool add_size_after(EngineLogReport& report, const LineInput& in, std::string_view key,
                    Component component, std::string device);

// State carried from line to line by the llama.cpp parser.
struct LlamaCppState {
  uint32_t context = 0;        // index of the current llama_context
  bool seen_context = false;   // a "constructing llama_context" line was seen
  bool compute_block = false;  // the previous llama.cpp line was a compute buffer line
  bool in_breakdown = false;   // inside a memory breakdown table
};

// State carried from line to line by the TensorRT-LLM parser: the CUDA graphs warmed up, as
// (draft length, batch size), counted once however often the warm-up runs (at most 4,096).
struct TrtllmState {
  std::set<std::pair<uint64_t, uint64_t>> graphs;
};

bool parse_llamacpp_line(const LineInput& in, LlamaCppState& state, EngineLogReport& report);
bool parse_vllm_line(const LineInput& in, EngineLogReport& report);
bool parse_sglang_line(const LineInput& in, EngineLogReport& report);
bool parse_trtllm_line(const LineInput& in, TrtllmState& state, EngineLogReport& report);

// Returns true when the line carries a mark of the engine without figures (a logger prefix,
// a banner), used to detect the engine before its first figure.
bool is_llamacpp_marker(std::string_view text);
bool is_vllm_marker(std::string_view text);
bool is_sglang_marker(std::string_view text);
bool is_trtllm_marker(std::string_view text);

}  // namespace kvprof::enginelog::detail
