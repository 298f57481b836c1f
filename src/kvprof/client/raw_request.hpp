// The request side of the raw HTTP/1.1 transport: http:// URL parsing and the request bytes,
// built once per request into one buffer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::client {

struct HttpUrl {
  std::string host;  // a name or an address; IPv6 without brackets
  uint16_t port = 80;
  bool port_given = false;  // the URL names its port (else 80)
  std::string path;         // starts with '/'; includes the query, never the fragment
  std::string host_header;  // the Host header value ("[::1]:8000", "example.com")
};

// Parses an http:// URL; an input error for another scheme, credentials in the URL, a bad port
// or characters that cannot go into a request line.
Expected<HttpUrl> parse_http_url(std::string_view url);

// True when `url` is http:// and parse_http_url accepts it.
bool is_plain_http_url(std::string_view url);

// The TCP port of an http:// or https:// URL whose host is a loopback address ("[::1]" too; 80
// or 443 when the URL names none); nullopt for another host or a URL parse_http_url rejects.
std::optional<uint16_t> loopback_port(std::string_view url);

// The whole request: "POST <path> HTTP/1.1", Host, Content-Type: application/json, Accept:
// text/event-stream, Content-Length, `extra_headers`, Connection: keep-alive, then `body`.
// An input error when an extra header is not "Name: value" on one line.
Expected<std::string> build_post_request(const HttpUrl& url, std::string_view body,
                                         const std::vector<std::string>& extra_headers);

}  // namespace kvprof::client
