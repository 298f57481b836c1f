// Parsing and printing of byte quantities.
#include "kvprof/util/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

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
  const std::string original(trim(text));
  const auto bad = [&](std::string_view why) {
    return fail(ErrorKind::input, fmt::format("'{}' is not a count{}", original, why));
  };
  if (original.empty() || original.size() > 32) return bad("");
  // vLLM's human_readable_int: k m g t are powers of 1000 (25.6k is allowed), K M G T of 1024.
  std::string digits = original;
  uint64_t scale = 1;
  bool decimal_suffix = false;
  static constexpr std::string_view k_suffixes = "kmgtKMGT";
  if (const size_t at = k_suffixes.find(digits.back()); at != std::string_view::npos) {
    const unsigned power = (at % 4) + 1;
    decimal_suffix = at < 4;
    for (unsigned i = 0; i < power; ++i)
      scale *= decimal_suffix ? 1000 : 1024;
    digits.pop_back();
  }
  const size_t dot = digits.find('.');
  const std::string whole = digits.substr(0, dot);
  const std::string fraction = dot == std::string::npos ? "" : digits.substr(dot + 1);
  const auto all_digits = [](const std::string& t) {
    return !t.empty() &&
           std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!all_digits(whole) || (dot != std::string::npos && !all_digits(fraction))) return bad("");
  if (dot != std::string::npos && !decimal_suffix) {
    return bad(scale == 1 ? ""
                          : fmt::format(" (decimals only go with k, m, g, t: did you mean {}{}?)",
                                        digits, static_cast<char>(std::tolower(original.back()))));
  }
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(whole.data(), whole.data() + whole.size(), value);
  if (ec != std::errc{} || ptr != whole.data() + whole.size()) return bad("");
  if (value > (1ULL << 40) / scale) return bad(" (over 2^40)");
  if (dot == std::string::npos) return value * scale;
  // int(float(number) * mult), as vLLM computes it: 1.005k is 1004 there, and here.
  return static_cast<uint64_t>(std::strtod(digits.c_str(), nullptr) * static_cast<double>(scale));
}

}  // namespace kvprof
