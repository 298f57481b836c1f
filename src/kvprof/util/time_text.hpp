// Times as text, in UTC: one place for the ISO 8601 stamps summaries and reports write.
#pragma once

#include <string>

namespace kvprof {

// `unix_s` (seconds since 1970) as strftime's `format` writes it in UTC, at most 63 characters.
std::string utc_time_text(double unix_s, const char* format);

// `unix_s` as ISO 8601 in UTC to the second: "2026-11-29T10:17:43Z".
std::string iso_utc(double unix_s);

}  // namespace kvprof
