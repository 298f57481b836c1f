// Reading an engine's own families (see families.hpp).
#include "kvprof/metrics/families.hpp"

#include <charconv>

namespace kvprof::metrics {

std::optional<double> sum_of(const Exposition& expo, std::string_view sample_name) {
  std::optional<double> total;
  for_each_sample(expo, sample_name,
                  [&](const Sample& s) { total = total.value_or(0.0) + s.value; });
  return total;
}

std::optional<double> mean_of(const Exposition& expo, std::string_view sample_name) {
  double total = 0.0;
  size_t n = 0;
  for_each_sample(expo, sample_name, [&](const Sample& s) {
    total += s.value;
    ++n;
  });
  if (n == 0) return std::nullopt;
  return total / static_cast<double>(n);
}

// The sum for the first of `names` that the exposition reports (newer spelling first).
std::optional<double> sum_first(const Exposition& expo,
                                std::initializer_list<std::string_view> names) {
  for (const auto name : names) {
    if (auto v = sum_of(expo, name)) return v;
  }
  return std::nullopt;
}

std::optional<double> mean_first(const Exposition& expo,
                                 std::initializer_list<std::string_view> names) {
  for (const auto name : names) {
    if (auto v = mean_of(expo, name)) return v;
  }
  return std::nullopt;
}

std::optional<uint64_t> to_count(std::optional<double> value) {
  if (!value || !std::isfinite(*value) || *value < 0.0 || *value > 9.0e18) return std::nullopt;
  return static_cast<uint64_t>(std::llround(*value));
}

std::optional<uint64_t> parse_label_count(const std::string* text) {
  if (text == nullptr || text->empty()) return std::nullopt;
  uint64_t value = 0;
  const char* end = text->data() + text->size();
  const auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

}  // namespace kvprof::metrics
