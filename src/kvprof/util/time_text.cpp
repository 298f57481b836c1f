// Times as text (see time_text.hpp).
#include "kvprof/util/time_text.hpp"

#include <ctime>

namespace kvprof {

std::string utc_time_text(double unix_s, const char* format) {
  const auto t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, format, &tm);
  return std::string(buf, n);
}

std::string iso_utc(double unix_s) {
  return utc_time_text(unix_s, "%Y-%m-%dT%H:%M:%SZ");
}

}  // namespace kvprof
