// TensorRT-LLM startup lines (not yet read).
#include "kvprof/enginelog/engines.hpp"
#include "kvprof/enginelog/scan.hpp"

namespace kvprof::enginelog::detail {

bool is_trtllm_marker(std::string_view text) {
  return contains(text, "[TRT-LLM]");
}

bool parse_trtllm_line(const LineInput&, EngineLogReport&) {
  return false;
}

}  // namespace kvprof::enginelog::detail
