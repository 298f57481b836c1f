// libFuzzer target for the report's experiment sections: the bytes are a sweep.json, a
// find_max.json or a comparison's JSON (a file on disk anyone may have edited); whatever they
// hold, building the sweep, find-max and delta sections is a value, and the page's data is JSON
// that serializes (every string valid UTF-8).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kvprof/report/html/experiment_sections.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvprof::report::html;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  (void)sweep_section(doc, "/fuzz").dump();
  (void)find_max_section(doc, "/fuzz").dump();
  (void)compare_deltas(doc).dump();
  (void)experiment_run_dirs("sweep", doc, "/fuzz");
  (void)experiment_run_dirs("find-max", doc, "/fuzz");
  return 0;
}
