// Which Transport serves an endpoint: the raw HTTP/1.1 client for plain http://, libcurl for
// https://, proxies and on request (--transport / KVPROF_TRANSPORT).
#include <cstdlib>

#include "kvprof/client/raw_request.hpp"
#include "kvprof/client/transport.hpp"
#include "kvprof/util/net.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::client {

namespace {

bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

}  // namespace

std::string_view transport_kind_name(TransportKind kind) {
  switch (kind) {
    case TransportKind::automatic:
      return "auto";
    case TransportKind::raw:
      return "raw";
    case TransportKind::curl:
      return "curl";
  }
  return "auto";
}

Expected<TransportKind> parse_transport_kind(std::string_view text) {
  for (const auto kind : {TransportKind::automatic, TransportKind::raw, TransportKind::curl}) {
    if (iequals(text, transport_kind_name(kind))) return kind;
  }
  return fail(ErrorKind::input,
              "unknown transport '" + std::string(text) + "' (expected auto, raw or curl)");
}

TransportKind resolve_transport_kind(TransportKind kind, std::string_view endpoint) {
  if (kind != TransportKind::automatic) return kind;
  if (const char* v = std::getenv("KVPROF_TRANSPORT"); v != nullptr) {
    if (auto named = parse_transport_kind(v); named && *named != TransportKind::automatic) {
      return *named;
    }
  }
  const auto url = parse_http_url(endpoint);
  if (!url) return TransportKind::curl;  // https:// and anything else libcurl understands
  // libcurl honours proxy variables (and no_proxy); the raw client never uses a proxy.
  const bool proxy = env_set("http_proxy") || env_set("all_proxy") || env_set("ALL_PROXY");
  if (proxy && !is_loopback_host(url->host)) return TransportKind::curl;
  return TransportKind::raw;
}

std::unique_ptr<Transport> make_transport(TransportKind kind, std::string_view endpoint,
                                          const RawOptions& raw) {
  if (resolve_transport_kind(kind, endpoint) == TransportKind::raw) return make_raw_transport(raw);
  return make_curl_transport();
}

std::unique_ptr<Transport> make_default_transport(std::string_view endpoint) {
  return make_transport(TransportKind::automatic, endpoint);
}

}  // namespace kvprof::client
