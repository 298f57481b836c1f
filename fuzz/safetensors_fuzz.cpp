// libFuzzer target: safetensors headers from arbitrary bytes must parse or fail, never crash.
#include <cstddef>
#include <cstdint>
#include <span>

#include "kvprof/model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  // The whole input as a file, and as the prefix of a larger file (data area past the end).
  (void)kvprof::model::parse_safetensors_header(bytes, size);
  (void)kvprof::model::parse_safetensors_header(bytes, uint64_t{size} + 4096);
  return 0;
}
