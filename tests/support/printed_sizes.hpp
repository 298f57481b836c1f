// Test-only: the bytes an engine means by a size it prints with two decimals ("110.53 MiB"),
// written as hundredths so expectations read like the log line.
#pragma once

#include <cstdint>

namespace kvprof::test {

// 110.53 MiB -> mib_x100(11053), rounded to the nearest byte.
inline uint64_t mib_x100(uint64_t hundredths) {
  return ((hundredths << 20) + 50) / 100;
}

// 63.32 GiB -> gib_x100(6332), rounded to the nearest byte.
inline uint64_t gib_x100(uint64_t hundredths) {
  return ((hundredths << 30) + 50) / 100;
}

}  // namespace kvprof::test
