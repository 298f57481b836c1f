// libFuzzer target for the run folder reader of compare and validate: the bytes are split into a
// summary.json and a manifest.json (where the first byte says); whatever they hold, reading them
// is an error value or a record, and comparing and validating that record never crashes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kvprof/experiment/compare.hpp"
#include "kvprof/experiment/validate.hpp"
#include "kvprof/results/run_summary.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvprof::experiment;
  using namespace kvprof::results;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t split = size == 0 ? 0 : data[0] % (size + 1);
  auto run = parse_run_summary(text.substr(split), text.substr(0, split), "fuzz");
  (void)command_flags(text);
  if (!run) return 0;
  const auto c = compare_runs({*run, *run}, {});
  (void)comparison_json(c).dump();  // every string is valid UTF-8
  (void)comparison_text(c);
  const auto v = validate_run(*run, run->estimated, "fuzz");
  (void)validation_json(v).dump();
  (void)validation_text(v);
  return 0;
}
