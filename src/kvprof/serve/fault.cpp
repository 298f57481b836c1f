// Fault specs and which request gets one (see fault.hpp).
#include "kvprof/serve/fault.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <optional>

#include "kvprof/util/strings.hpp"

namespace kvprof::serve {

namespace {

constexpr double k_max_fault_seconds = 3600.0;

std::optional<double> parse_double(std::string_view text) {
  double value = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || !std::isfinite(value)) return std::nullopt;
  return value;
}

// A uniform draw in [0, 1) from the seed and the request number (splitmix64).
double fault_draw(uint64_t seed, uint64_t request_number) {
  uint64_t x = seed ^ (request_number * 0x9e3779b97f4a7c15ULL);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) / static_cast<double>(1ULL << 53);
}

}  // namespace

std::string fault_kind_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::none:
      return "none";
    case FaultKind::reset:
      return "reset";
    case FaultKind::status_500:
      return "500";
    case FaultKind::status_503:
      return "503";
    case FaultKind::status_429:
      return "429";
    case FaultKind::stall:
      return "stall";
    case FaultKind::malformed_sse:
      return "malformed";
    case FaultKind::slow_first_token:
      return "slow_first_token";
  }
  return "none";
}

Expected<FaultSpec> parse_fault_spec(std::string_view text) {
  const auto parts = split(text, ';');
  FaultSpec spec;
  const std::string kind = to_lower(trim(parts.empty() ? std::string_view{} : parts[0]));
  if (kind == "none" || kind.empty()) {
    spec.kind = FaultKind::none;
  } else if (kind == "reset") {
    spec.kind = FaultKind::reset;
  } else if (kind == "500") {
    spec.kind = FaultKind::status_500;
  } else if (kind == "503") {
    spec.kind = FaultKind::status_503;
  } else if (kind == "429") {
    spec.kind = FaultKind::status_429;
  } else if (kind == "stall") {
    spec.kind = FaultKind::stall;
  } else if (kind == "malformed" || kind == "malformed_sse") {
    spec.kind = FaultKind::malformed_sse;
  } else if (kind == "slow_first_token" || kind == "slow-first-token") {
    spec.kind = FaultKind::slow_first_token;
  } else {
    return fail(ErrorKind::input,
                fmt::format("unknown fault '{}' (reset, 500, 503, 429, stall, malformed, "
                            "slow_first_token)",
                            kind));
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string part = trim(parts[i]);
    if (part.empty()) continue;
    const auto eq = part.find('=');
    if (eq == std::string::npos)
      return fail(ErrorKind::input, fmt::format("fault option '{}' has no '='", part));
    const std::string key = to_lower(trim(std::string_view(part).substr(0, eq)));
    const auto value = parse_double(trim(std::string_view(part).substr(eq + 1)));
    if (!value || *value < 0) {
      return fail(ErrorKind::input, fmt::format("fault option '{}' needs a number >= 0", part));
    }
    if (key == "after") {
      if (*value > 1e6) return fail(ErrorKind::input, "fault option after= is at most 1000000");
      spec.after_tokens = static_cast<uint32_t>(*value);
    } else if (key == "seconds" || key == "retry_after") {
      if (*value > k_max_fault_seconds) {
        return fail(ErrorKind::input, "fault option seconds= is at most 3600");
      }
      spec.seconds = *value;
    } else {
      return fail(ErrorKind::input,
                  fmt::format("unknown fault option '{}' (after, seconds, retry_after)", key));
    }
  }
  return spec;
}

Expected<FaultSpec> request_fault(const FaultOptions& options, std::string_view header,
                                  uint64_t request_number) {
  if (options.honor_header && !header.empty()) {
    auto spec = parse_fault_spec(header);
    if (!spec) return fail(ErrorKind::input, "X-Kvprof-Fault: " + spec.error().message);
    return *spec;
  }
  if (options.rate > 0 && fault_draw(options.seed, request_number) < options.rate) {
    return options.fault;
  }
  return FaultSpec{};
}

}  // namespace kvprof::serve
