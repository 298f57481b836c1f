// Parser of the Prometheus text exposition format (0.0.4), tolerant of OpenMetrics text
// (`# EOF`, `# UNIT`, `_created` samples, exemplars): families with their samples, every count
// bounded; strict mode fails on the first malformed line, lenient mode skips and counts it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::metrics {

// The type a `# TYPE` line declares; a family without one is `untyped`.
enum class MetricType {
  counter,
  gauge,
  histogram,
  gaugehistogram,
  summary,
  info,
  stateset,
  untyped
};

// Returns the exposition spelling of `type` ("counter", ...).
std::string_view metric_type_name(MetricType type);

struct Label {
  std::string name;
  std::string value;  // unescaped
  friend bool operator==(const Label&, const Label&) = default;
};

struct Sample {
  std::string name;  // the full sample name, e.g. "vllm:e2e_request_latency_seconds_bucket"
  std::vector<Label> labels;
  double value = 0.0;
  std::optional<int64_t> timestamp_ms;

  // Returns the value of label `label_name`, or nullptr when the sample has no such label.
  [[nodiscard]] const std::string* label(std::string_view label_name) const;
};

struct MetricFamily {
  std::string name;
  MetricType type = MetricType::untyped;
  std::string help;  // unescaped; empty when no `# HELP`
  std::string unit;  // OpenMetrics `# UNIT`; empty when none
  std::vector<Sample> samples;
};

struct ParseOptions {
  bool strict = true;  // false: skip malformed lines and count them
  size_t max_line_bytes = 64 * 1024;
  size_t max_labels_per_sample = 128;
  size_t max_samples = 1'000'000;
};

struct Exposition {
  std::vector<MetricFamily> families;  // in order of first appearance
  size_t n_samples = 0;
  size_t n_skipped_lines = 0;     // lenient mode only
  std::string first_skip_reason;  // "line N: ..." of the first skipped line; empty when none
  bool saw_eof = false;           // an OpenMetrics `# EOF` ended the text

  // Returns the family named `name`, or nullptr.
  [[nodiscard]] const MetricFamily* find(std::string_view name) const;
};

// Parses exposition `text`. Strict mode returns an input error "line N: ..." for the first
// malformed line; both modes return an input error when more than max_samples samples appear.
Expected<Exposition> parse_prometheus_text(std::string_view text, const ParseOptions& options = {});

// Parses a sample value as the format allows ("1.5e3", "NaN", "+Inf", "-Inf"); nullopt otherwise.
std::optional<double> parse_prometheus_value(std::string_view text);

}  // namespace kvprof::metrics
