// Network-address helpers (see net.hpp).
#include "kvprof/util/net.hpp"

#include "kvprof/util/strings.hpp"

namespace kvprof {

namespace {

// A decimal octet: 1 to 3 digits, at most 255.
bool is_octet(std::string_view s) {
  if (s.empty() || s.size() > 3) return false;
  int value = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  return value <= 255;
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  if (iequals(host, "localhost") || host == "::1" || host == "[::1]") return true;
  if (!host.starts_with("127.")) return false;
  host.remove_prefix(4);
  for (int i = 0; i < 3; ++i) {
    const size_t dot = host.find('.');
    const std::string_view octet = host.substr(0, dot);
    if (!is_octet(octet)) return false;
    if (i < 2) {
      if (dot == std::string_view::npos) return false;
      host.remove_prefix(dot + 1);
    } else if (dot != std::string_view::npos) {
      return false;
    }
  }
  return true;
}

}  // namespace kvprof
