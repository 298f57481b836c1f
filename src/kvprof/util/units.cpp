// Parsing and printing of byte quantities.
#include "kvprof/util/units.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "kvprof/util/strings.hpp"

namespace kvprof {

uint64_t gib_to_bytes(double gib) {
  if (!(gib > 0)) return 0;
  return static_cast<uint64_t>(std::llround(gib * static_cast<double>(k_gib)));
}

std::string format_bytes(uint64_t bytes, int decimals, bool adaptive) {
  if (adaptive && bytes < k_gib) {
    return fmt::format("{:.{}f} MiB", static_cast<double>(bytes) / k_mib, decimals);
  }
  return fmt::format("{:.{}f} GiB", bytes_to_gib(bytes), decimals);
}

Expected<uint64_t> parse_bytes(std::string_view text) {
  const std::string original(text);
  std::string s = to_lower(trim(text));
  size_t unit_pos = 0;
  while (unit_pos < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[unit_pos])) || s[unit_pos] == '.')) {
    ++unit_pos;
  }
  if (unit_pos == 0) return fail(ErrorKind::input, fmt::format("'{}' is not a size", original));
  double value = 0;
  const auto number = s.substr(0, unit_pos);
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc{} || ptr != number.data() + number.size() || !std::isfinite(value)) {
    return fail(ErrorKind::input, fmt::format("'{}' is not a size", original));
  }
  const std::string unit = trim(s.substr(unit_pos));
  double scale = 0;
  if (unit.empty() || unit == "b") {
    scale = 1;
  } else if (unit == "k" || unit == "kib") {
    scale = static_cast<double>(k_kib);
  } else if (unit == "kb") {
    scale = 1e3;
  } else if (unit == "m" || unit == "mib") {
    scale = static_cast<double>(k_mib);
  } else if (unit == "mb") {
    scale = 1e6;
  } else if (unit == "g" || unit == "gib") {
    scale = static_cast<double>(k_gib);
  } else if (unit == "gb") {
    scale = 1e9;
  } else if (unit == "t" || unit == "tib") {
    scale = static_cast<double>(k_gib) * 1024;
  } else if (unit == "tb") {
    scale = 1e12;
  } else {
    return fail(
        ErrorKind::input,
        fmt::format("'{}': unknown size unit '{}' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)",
                    original, unit));
  }
  const double bytes = value * scale;
  if (bytes > 1.8e19) return fail(ErrorKind::input, fmt::format("'{}' is too large", original));
  return static_cast<uint64_t>(std::llround(bytes));
}

Expected<uint64_t> parse_count(std::string_view text) {
  const std::string original(text);
  std::string s = to_lower(trim(text));
  uint64_t scale = 1;
  if (!s.empty() && s.back() == 'k') {
    scale = 1024;
    s.pop_back();
  }
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc{} || ptr != s.data() + s.size() || value > (1ULL << 40)) {
    return fail(ErrorKind::input, fmt::format("'{}' is not a count", original));
  }
  return value * scale;
}

}  // namespace kvprof
