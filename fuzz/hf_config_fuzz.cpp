// libFuzzer target: config.json text from arbitrary bytes must parse or fail, never crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kvprof/model/hf_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)kvprof::model::parse_hf_config_text(text, "fuzz");
  return 0;
}
