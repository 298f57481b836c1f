// Tests for src/kvprof/client/raw_request.cpp (http:// URLs, request bytes) and
// transport_factory.cpp (which transport serves an endpoint).
#include "kvprof/client/raw_request.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

#include "kvprof/client/transport.hpp"

namespace kvprof::client {
namespace {

TEST(RawRequest, ParsesHttpUrls) {
  auto u = parse_http_url("http://127.0.0.1:8000/v1/completions?x=1#frag");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8000);
  EXPECT_EQ(u->path, "/v1/completions?x=1");
  EXPECT_EQ(u->host_header, "127.0.0.1:8000");

  u = parse_http_url("HTTP://Example.com");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->path, "/");
  EXPECT_EQ(u->host_header, "Example.com");

  u = parse_http_url("http://[::1]:9000/v1");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->host_header, "[::1]:9000");

  u = parse_http_url("http://h?q=1");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->path, "/?q=1");
}

TEST(RawRequest, RejectsWhatItCannotSend) {
  for (const char* url :
       {"https://h/v1", "ftp://h", "h:80/x", "http://", "http://:80/", "http://h:0/",
        "http://h:65536/", "http://h:8x/", "http://user:pw@h/", "http://h/a b", "http://h/\r\nX: y",
        "http://[::1/", "http://::1:80/", "http://[::1]x/"}) {
    EXPECT_FALSE(parse_http_url(url)) << url;
    EXPECT_FALSE(is_plain_http_url(url)) << url;
  }
}

TEST(RawRequest, FindsTheLoopbackPortTheProfilerLooksForAServerOn) {
  EXPECT_EQ(loopback_port("http://127.0.0.1:8000/v1"), uint16_t{8000});
  EXPECT_EQ(loopback_port("http://localhost/v1"), uint16_t{80});
  EXPECT_EQ(loopback_port("https://localhost/v1"), uint16_t{443});
  EXPECT_EQ(loopback_port("HTTPS://127.0.0.2:8443"), uint16_t{8443});
  EXPECT_EQ(loopback_port("https://127.0.0.1:80/"), uint16_t{80});  // named, so kept
  // Bracketed IPv6, with and without a port (the second was missed before).
  EXPECT_EQ(loopback_port("http://[::1]:9000/v1"), uint16_t{9000});
  EXPECT_EQ(loopback_port("http://[::1]/v1"), uint16_t{80});
  for (const char* url :
       {"http://10.0.0.1:8000/v1", "http://127.0.0.1.nip.io:8000", "http://[::2]:80/",
        "http://127.0.0.1:0/", "http://[::1/", "ftp://[::1]", "127.0.0.1:8000"}) {
    EXPECT_EQ(loopback_port(url), std::nullopt) << url;
  }
}

TEST(RawRequest, BuildsOneBufferWithEveryHeader) {
  const auto u = parse_http_url("http://localhost:8000/v1/completions").value();
  const auto wire = build_post_request(u, R"({"a":1})", {"Authorization: Bearer k"}).value();
  EXPECT_EQ(wire,
            "POST /v1/completions HTTP/1.1\r\nHost: localhost:8000\r\n"
            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            "Content-Length: 7\r\nAuthorization: Bearer k\r\nConnection: keep-alive\r\n\r\n"
            R"({"a":1})");
  // Header injection is refused.
  EXPECT_FALSE(build_post_request(u, "", {"X: a\r\nEvil: b"}));
  EXPECT_FALSE(build_post_request(u, "", {"no colon"}));
  EXPECT_FALSE(build_post_request(u, "", {": no name"}));
}

TEST(TransportFactory, PicksRawForPlainHttpAndCurlOtherwise) {
  const char* saved = std::getenv("KVPROF_TRANSPORT");
  const std::string saved_value = saved ? saved : "";
  unsetenv("KVPROF_TRANSPORT");
  EXPECT_EQ(resolve_transport_kind(TransportKind::automatic, "http://127.0.0.1:8000"),
            TransportKind::raw);
  EXPECT_EQ(resolve_transport_kind(TransportKind::automatic, "https://api.example.com/v1"),
            TransportKind::curl);
  EXPECT_EQ(resolve_transport_kind(TransportKind::curl, "http://127.0.0.1:8000"),
            TransportKind::curl);
  EXPECT_EQ(resolve_transport_kind(TransportKind::raw, "https://h"), TransportKind::raw);
  setenv("KVPROF_TRANSPORT", "curl", 1);
  EXPECT_EQ(resolve_transport_kind(TransportKind::automatic, "http://127.0.0.1:8000"),
            TransportKind::curl);
  EXPECT_EQ(resolve_transport_kind(TransportKind::raw, "http://127.0.0.1:8000"),
            TransportKind::raw);  // an explicit kind wins over the environment
  setenv("KVPROF_TRANSPORT", "bogus", 1);
  EXPECT_EQ(resolve_transport_kind(TransportKind::automatic, "http://127.0.0.1:8000"),
            TransportKind::raw);
  if (saved) {
    setenv("KVPROF_TRANSPORT", saved_value.c_str(), 1);
  } else {
    unsetenv("KVPROF_TRANSPORT");
  }
  EXPECT_EQ(parse_transport_kind("RAW").value(), TransportKind::raw);
  EXPECT_EQ(parse_transport_kind("auto").value(), TransportKind::automatic);
  EXPECT_FALSE(parse_transport_kind("http2"));
  EXPECT_NE(make_default_transport("http://127.0.0.1:1"), nullptr);
}

TEST(TransportFactory, AProxyIsBypassedOnlyForLoopbackHosts) {
  // Saves and restores the variables it sets; ctest runs each test in its own process.
  const char* saved_transport = std::getenv("KVPROF_TRANSPORT");
  const std::string saved_transport_value = saved_transport ? saved_transport : "";
  const char* saved_proxy = std::getenv("http_proxy");
  const std::string saved_proxy_value = saved_proxy ? saved_proxy : "";
  unsetenv("KVPROF_TRANSPORT");
  setenv("http_proxy", "http://proxy.invalid:3128", 1);
  const auto kind_for = [](const char* url) {
    return resolve_transport_kind(TransportKind::automatic, url);
  };
  EXPECT_EQ(kind_for("http://127.0.0.1:8000"), TransportKind::raw);
  EXPECT_EQ(kind_for("http://127.1.2.3:8000"), TransportKind::raw);
  EXPECT_EQ(kind_for("http://LOCALHOST:8000"), TransportKind::raw);
  EXPECT_EQ(kind_for("http://[::1]:8000"), TransportKind::raw);
  // Names that only start like a loopback address go through the proxy.
  EXPECT_EQ(kind_for("http://127.0.0.1.nip.io:8000"), TransportKind::curl);
  EXPECT_EQ(kind_for("http://localhost.example.com:8000"), TransportKind::curl);
  EXPECT_EQ(kind_for("http://10.0.0.1:8000"), TransportKind::curl);
  if (saved_proxy) {
    setenv("http_proxy", saved_proxy_value.c_str(), 1);
  } else {
    unsetenv("http_proxy");
  }
  if (saved_transport) setenv("KVPROF_TRANSPORT", saved_transport_value.c_str(), 1);
}

}  // namespace
}  // namespace kvprof::client
