// libFuzzer target: a sweep file (YAML) from arbitrary bytes must parse or report its problems,
// never crash, and every problem must carry a position inside the input or none. The same bytes
// as a sweep's state file (JSON, which a stopped sweep resumes from) and as a configuration's
// conditions file read as a state or an input error, never an exception; the conditions read stay
// within the bound of one configuration.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kvprof/experiment/sweep_config.hpp"
#include "kvprof/experiment/sweep_state.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = kvprof::experiment::parse_sweep_config(text);
  for (const auto& e : parsed.errors) {
    if (e.pos.line < 0 || e.message.empty()) std::abort();
  }
  if (parsed.errors.size() > kvprof::experiment::k_max_reported_errors) std::abort();
  const auto state = kvprof::experiment::parse_state(text, "sweep_state.json");
  if (!state && state.error().kind != kvprof::ErrorKind::input) std::abort();
  kvprof::experiment::ConfigRecord record;
  record.fingerprint = "00000000deadbeef";
  record.runs = {{"a", "/a"}, {"b", "/b"}};
  const auto conditions = kvprof::experiment::parse_conditions(text, "conditions.json", record);
  if (!conditions && conditions.error().kind != kvprof::ErrorKind::input) std::abort();
  if (record.conditions.size() > kvprof::experiment::k_max_conditions_per_entry) std::abort();
  for (const auto& [cid, c] : record.conditions) {
    if (c.run >= record.runs.size()) std::abort();
  }
  return 0;
}
