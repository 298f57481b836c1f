// libFuzzer target for workload.jsonl: both forms (prompts in every line, or a header whose
// generator makes them again, checked against each line's hash), with a small bound on what a
// header may ask the generator for. Must never crash, hang or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "kvprof/workload/workload_io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  const auto requests = kvprof::workload::read_workload(in, 1 << 16);
  if (requests) {
    for (const auto& r : *requests) {
      if (r.prompt_format == kvprof::workload::PromptFormat::tokens &&
          r.prompt_token_ids.size() != r.input_len) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
