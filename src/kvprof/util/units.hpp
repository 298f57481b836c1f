// Byte quantities: bytes are uint64_t inside kvprof; GiB (2^30) and GB (10^9) appear only when
// printing or parsing what a user typed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvprof/util/error.hpp"

namespace kvprof {

inline constexpr uint64_t k_kib = 1ULL << 10;
inline constexpr uint64_t k_mib = 1ULL << 20;
inline constexpr uint64_t k_gib = 1ULL << 30;

// Returns a / b rounded up; 0 when b is 0.
inline constexpr uint64_t ceil_div(uint64_t a, uint64_t b) {
  return b == 0 ? 0 : (a + b - 1) / b;
}

// Returns bytes as GiB (2^30).
inline double bytes_to_gib(uint64_t bytes) {
  return static_cast<double>(bytes) / k_gib;
}
inline double bytes_to_gib(double bytes) {
  return bytes / k_gib;
}

// Returns GiB as bytes, rounded to the nearest byte; negative values clamp to 0.
uint64_t gib_to_bytes(double gib);

// Formats bytes as "12.34 GiB" (or MiB below 1 GiB when `adaptive`).
std::string format_bytes(uint64_t bytes, int decimals = 2, bool adaptive = false);

// Parses "24GiB", "24 GiB", "24G" (GiB), "80GB" (10^9), "512MiB", or a plain byte count;
// returns an input error naming the text when it is not a size.
Expected<uint64_t> parse_bytes(std::string_view text);

// Parses a token count as vLLM's human_readable_int does: "8192", "8k" (8000), "25.6k" (25600),
// "8K" (8192); k m g t are powers of 1000, K M G T of 1024 (whole numbers only); at most 2^40.
// Returns an input error otherwise.
Expected<uint64_t> parse_count(std::string_view text);

}  // namespace kvprof
