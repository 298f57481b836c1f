// SGLang startup lines (not yet read: see trtllm.cpp for the same state).
#include "kvprof/enginelog/engines.hpp"
#include "kvprof/enginelog/scan.hpp"

namespace kvprof::enginelog::detail {

bool is_sglang_marker(std::string_view text) {
  return contains(text, "sglang.srt") || contains(text, "sglang.launch_server");
}

bool parse_sglang_line(const LineInput&, EngineLogReport&) {
  return false;
}

}  // namespace kvprof::enginelog::detail
