// libFuzzer target: a sweep file (YAML) from arbitrary bytes must parse or report its problems,
// never crash, and every problem must carry a position inside the input or none.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kvprof/experiment/sweep_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = kvprof::experiment::parse_sweep_config(text);
  for (const auto& e : parsed.errors) {
    if (e.pos.line < 0 || e.message.empty()) std::abort();
  }
  if (parsed.errors.size() > kvprof::experiment::k_max_reported_errors) std::abort();
  return 0;
}
