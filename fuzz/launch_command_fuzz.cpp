// libFuzzer target: a server command (--launch, a sweep's launch) from arbitrary bytes must split
// into words or be refused, and be read as some engine's server or none, never crash; the words
// stay within their bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kvprof/engines/registry.hpp"
#include "kvprof/util/shell.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto words = kvprof::split_shell_words(text);
  if (words && words->size() > kvprof::k_max_command_words) std::abort();
  if (words) {
    size_t chars = 0;
    for (const auto& w : *words)
      chars += w.size();
    if (chars > text.size()) std::abort();
  }
  const auto reading = kvprof::engines::read_launch_command(text);
  if (reading && reading->settings.n_parallel == 0) std::abort();
  return 0;
}
