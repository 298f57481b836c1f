// libFuzzer target for the GGUF reader: parse_gguf() on the input as a whole file and as the
// prefix of a longer one, and model_from_gguf() on whatever parses.
#include <cstddef>
#include <cstdint>
#include <span>

#include "kvprof/model/gguf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  for (const uint64_t file_size : {uint64_t{size}, uint64_t{size} + 4096}) {
    auto file = kvprof::model::parse_gguf(bytes, file_size);
    if (file) {
      auto model = kvprof::model::model_from_gguf(*file, "fuzz");
      (void)model;
    }
  }
  return 0;
}
