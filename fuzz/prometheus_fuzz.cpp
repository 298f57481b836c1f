// libFuzzer target for the Prometheus text parser: strict and lenient parses of the same bytes,
// then the canonical extraction and the CSV row of the lenient result; also the /slots parser.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kvprof/engines/registry.hpp"
#include "kvprof/metrics/prometheus.hpp"
#include "kvprof/metrics/snapshot.hpp"
#include "kvprof/metrics/trace_csv.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvprof::metrics;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  ParseOptions options;
  options.max_line_bytes = 4096;
  options.max_labels_per_sample = 16;
  options.max_samples = 10000;
  const auto strict = parse_prometheus_text(text, options);

  options.strict = false;
  const auto lenient = parse_prometheus_text(text, options);
  if (strict) {
    // What strict mode accepts, lenient mode accepts identically.
    if (!lenient || lenient->n_skipped_lines != 0 || lenient->n_samples != strict->n_samples) {
      std::abort();
    }
  }
  if (lenient) {
    size_t n = 0;
    for (const auto& family : lenient->families)
      n += family.samples.size();
    if (n != lenient->n_samples || n > options.max_samples) std::abort();
    ScrapeRecord record;
    record.status = ScrapeStatus::ok;
    record.snapshot = kvprof::engines::read_metrics(*lenient);
    const auto row = format_trace_row(record);
    if (row.empty()) std::abort();
  }
  (void)parse_llamacpp_slots(text);
  return 0;
}
