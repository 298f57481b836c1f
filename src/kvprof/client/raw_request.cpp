// http:// URLs and request bytes for the raw transport (see raw_request.hpp).
#include "kvprof/client/raw_request.hpp"

#include <fmt/format.h>

#include <charconv>

#include "kvprof/util/net.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::client {

namespace {

constexpr std::string_view k_scheme = "http://";

bool bad_url_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u <= 0x20 || u == 0x7f;
}

}  // namespace

Expected<HttpUrl> parse_http_url(std::string_view url) {
  if (url.size() < k_scheme.size() || !iequals(url.substr(0, k_scheme.size()), k_scheme)) {
    return fail(ErrorKind::input, fmt::format("not an http:// URL: '{}'", url.substr(0, 200)));
  }
  std::string_view rest = url.substr(k_scheme.size());
  if (const size_t hash = rest.find('#'); hash != std::string_view::npos)
    rest = rest.substr(0, hash);
  const size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return fail(ErrorKind::input, "credentials in the URL are not supported");
  }
  HttpUrl out;
  std::string_view port_text;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return fail(ErrorKind::input, "an unclosed [IPv6] host");
    out.host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return fail(ErrorKind::input, "bytes after an [IPv6] host");
      port_text = after.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return fail(ErrorKind::input, "no host in the URL");
  if (!authority.starts_with('[') && out.host.find(':') != std::string::npos) {
    return fail(ErrorKind::input, "an IPv6 host must be in brackets");
  }
  for (const char c : out.host) {
    if (bad_url_char(c) || c == '/' || c == '[' || c == ']' || c == '\\') {
      return fail(ErrorKind::input, "a bad character in the URL's host");
    }
  }
  if (!port_text.empty()) {
    unsigned port = 0;
    const auto [end, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
        port > 65535) {
      return fail(ErrorKind::input,
                  fmt::format("a bad port in the URL: '{}'", port_text.substr(0, 20)));
    }
    out.port = static_cast<uint16_t>(port);
    out.port_given = true;
  }
  for (const char c : path) {
    if (bad_url_char(c)) return fail(ErrorKind::input, "a space or control character in the URL");
  }
  out.path = path.empty() ? std::string("/") : std::string(path);
  if (out.path.front() == '?') out.path.insert(out.path.begin(), '/');
  const bool ipv6 = out.host.find(':') != std::string::npos;
  out.host_header = ipv6 ? "[" + out.host + "]" : out.host;
  if (out.port != 80) out.host_header += fmt::format(":{}", out.port);
  return out;
}

bool is_plain_http_url(std::string_view url) {
  return parse_http_url(url).has_value();
}

std::optional<uint16_t> loopback_port(std::string_view url) {
  constexpr std::string_view k_https = "https://";
  const bool tls = url.size() >= k_https.size() && iequals(url.substr(0, k_https.size()), k_https);
  const auto parsed =
      parse_http_url(tls ? fmt::format("{}{}", k_scheme, url.substr(k_https.size())) : url);
  if (!parsed || !is_loopback_host(parsed->host)) return std::nullopt;
  if (tls && !parsed->port_given) return uint16_t{443};
  return parsed->port;
}

Expected<std::string> build_post_request(const HttpUrl& url, std::string_view body,
                                         const std::vector<std::string>& extra_headers) {
  size_t extra_bytes = 0;
  for (const auto& h : extra_headers) {
    const size_t colon = h.find(':');
    if (colon == std::string::npos || colon == 0 ||
        h.find_first_of("\r\n", 0) != std::string::npos) {
      return fail(ErrorKind::input, "a request header that is not \"Name: value\" on one line");
    }
    extra_bytes += h.size() + 2;
  }
  std::string out;
  out.reserve(160 + url.path.size() + url.host_header.size() + extra_bytes + body.size());
  out += "POST ";
  out += url.path;
  out += " HTTP/1.1\r\nHost: ";
  out += url.host_header;
  out += "\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: ";
  out += fmt::format("{}", body.size());
  out += "\r\n";
  for (const auto& h : extra_headers) {
    out += h;
    out += "\r\n";
  }
  out += "Connection: keep-alive\r\n\r\n";
  out += body;
  return out;
}

}  // namespace kvprof::client
