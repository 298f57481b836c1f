// libFuzzer target for the run-folder CSV reader (report/html/csv.cpp): every row it returns has a
// cell for every requested column, and a filter never lets a non-matching row through.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kvprof/report/html/csv.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvprof::report::html;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const CsvRequest plain{
      {"t_mono_ns", "used_bytes", "kv_cache_usage"}, {"kind", "condition_id"}, {}, {}};
  if (const auto t = read_csv(text, plain)) {
    for (const auto& column : t->numeric)
      if (column.size() != t->n_rows) std::abort();
    for (const auto& column : t->text)
      if (column.size() != t->n_rows) std::abort();
  }
  const CsvRequest filtered{{"used_bytes"}, {"kind"}, "kind", "device"};
  if (const auto t = read_csv(text, filtered)) {
    for (const auto& kind : t->text[0])
      if (kind != "device") std::abort();
  }
  return 0;
}
