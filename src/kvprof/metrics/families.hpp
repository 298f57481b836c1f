// Reading an engine's own families out of a /metrics scrape: the sum or mean of a sample over its
// label sets (model_name, engine index, DP rank), the first of several spellings a release
// uses, counts and label values read safely. Every engine's metrics reader is built on these.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "kvprof/metrics/prometheus.hpp"

namespace kvprof::metrics {

// True for a value a count, ratio or size can hold: not NaN and not negative.
inline bool possible(double value) {
  return !std::isnan(value) && value >= 0.0;
}

// Calls `fn` for every sample named exactly `sample_name` whose value is possible: not NaN and not
// negative (every figure kvprof reads is a count, a ratio or a size).
template <class Fn>
void for_each_sample(const Exposition& expo, std::string_view sample_name, Fn&& fn) {
  for (const auto& family : expo.families) {
    if (!sample_name.starts_with(family.name)) continue;
    for (const auto& sample : family.samples) {
      if (sample.name == sample_name && possible(sample.value)) fn(sample);
    }
  }
}

// The sum of the samples named `sample_name` over their label sets; nullopt when there are none.
std::optional<double> sum_of(const Exposition& expo, std::string_view sample_name);

// Their mean; nullopt when there are none.
std::optional<double> mean_of(const Exposition& expo, std::string_view sample_name);

// The sum (mean) for the first of `names` that the exposition reports (newer spelling first).
std::optional<double> sum_first(const Exposition& expo,
                                std::initializer_list<std::string_view> names);
std::optional<double> mean_first(const Exposition& expo,
                                 std::initializer_list<std::string_view> names);

// `value` as a whole count; nullopt when absent, not finite, negative or over 9e18.
std::optional<uint64_t> to_count(std::optional<double> value);

// A label's value as a whole count ("1234"); nullopt when absent or not exactly a number.
std::optional<uint64_t> parse_label_count(const std::string* text);

}  // namespace kvprof::metrics
