// llama.cpp lines without buffers: settings ("llama_context: n_ctx = 8192"), model facts from
// the metadata dump and print_info, the build, and the memory breakdown table.
#pragma once

#include "kvprof/enginelog/engines.hpp"

namespace kvprof::enginelog::detail {

// A header or row of the memory breakdown table; a header starts a new table (the last one
// printed is kept: a fit pass prints projections before the run prints its own at exit).
bool parse_breakdown_line(const LineInput& in, LlamaCppState& state, EngineLogReport& report);

// A setting, a model fact, the build or the slot count; returns true when one was read.
bool parse_llamacpp_info_line(const LineInput& in, EngineLogReport& report);

}  // namespace kvprof::enginelog::detail
