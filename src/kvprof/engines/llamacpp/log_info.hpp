// llama.cpp lines without buffers: settings ("llama_context: n_ctx = 8192"), model facts from
// the metadata dump and print_info, the build, and the memory breakdown table.
#pragma once

#include <cstdint>

#include "kvprof/enginelog/line_reader.hpp"

namespace kvprof::engines {

// State carried from line to line by the llama.cpp reader.
struct LlamaCppState {
  uint32_t context = 0;        // index of the current llama_context
  bool seen_context = false;   // a "constructing llama_context" line was seen
  bool compute_block = false;  // the previous llama.cpp line was a compute buffer line
  bool in_breakdown = false;   // inside a memory breakdown table
};

// A header or row of the memory breakdown table; a header starts a new table (the last one
// printed is kept: a fit pass prints projections before the run prints its own at exit).
bool parse_breakdown_line(const enginelog::LineInput& in, LlamaCppState& state,
                          enginelog::EngineLogReport& report);

// A setting, a model fact, the build or the slot count; returns true when one was read.
bool parse_llamacpp_info_line(const enginelog::LineInput& in, enginelog::EngineLogReport& report);

}  // namespace kvprof::engines
