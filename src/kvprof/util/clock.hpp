// The two clocks kvprof reads: the monotonic one that times runs, and the wall clock that stamps
// what is written to disk.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>

namespace kvprof {

// CLOCK_MONOTONIC now in ns (std::chrono::steady_clock's clock on Linux): the clock runs,
// transports and samplers stamp events with.
inline int64_t monotonic_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Wall-clock time now in seconds since 1970 (UTC).
inline double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Wall-clock time now in whole milliseconds since 1970 (UTC).
inline int64_t unix_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace kvprof
