// Network-address helpers (see net.hpp).
#include "kvprof/util/net.hpp"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <vector>

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

// The address bytes of an IPv4 or IPv6 socket address; empty for other families.
std::string address_bytes(const sockaddr* sa) {
  if (sa == nullptr) return {};
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return std::string(reinterpret_cast<const char*>(&in->sin_addr), sizeof in->sin_addr);
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    return std::string(reinterpret_cast<const char*>(&in6->sin6_addr), sizeof in6->sin6_addr);
  }
  return {};
}

}  // namespace

std::optional<std::string> url_host(std::string_view url) {
  size_t scheme = 0;
  if (url.size() >= 7 && iequals(url.substr(0, 7), "http://")) {
    scheme = 7;
  } else if (url.size() >= 8 && iequals(url.substr(0, 8), "https://")) {
    scheme = 8;
  } else {
    return std::nullopt;
  }
  std::string_view rest = url.substr(scheme);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) rest.remove_prefix(at + 1);
  std::string_view host;
  if (rest.starts_with('[')) {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = rest.substr(1, close - 1);
  } else {
    host = rest.substr(0, rest.find(':'));
  }
  if (host.empty()) return std::nullopt;
  return std::string(host);
}

bool is_local_host(std::string_view host) {
  if (is_loopback_host(host)) return true;
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) == 0 && iequals(host, name.data())) return true;

  std::vector<std::string> local;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (auto bytes = address_bytes(a->ifa_addr); !bytes.empty()) local.push_back(std::move(bytes));
  }
  freeifaddrs(list);

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  const std::string host_text(host);
  if (getaddrinfo(host_text.c_str(), nullptr, &hints, &resolved) != 0) return false;
  bool found = false;
  for (const addrinfo* r = resolved; r != nullptr && !found; r = r->ai_next) {
    const std::string bytes = address_bytes(r->ai_addr);
    for (const auto& l : local)
      found = found || (!bytes.empty() && bytes == l);
  }
  freeaddrinfo(resolved);
  return found;
}

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
