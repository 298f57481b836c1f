#include "kvprof/client/http_get.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "unit/metrics_test_server.hpp"

namespace kvprof::client {
namespace {

using kvprof::testing::LoopbackHttpServer;
using kvprof::testing::TestReply;

TEST(HttpGet, ReturnsStatusBodyAndContentType) {
  LoopbackHttpServer server([](const std::string& path) {
    if (path == "/metrics") return TestReply{200, "x 1\n", "text/plain; version=0.0.4", 0};
    return TestReply{404, "not found", "text/plain", 0};
  });
  HttpGetFailure why = HttpGetFailure::other;
  const auto ok = http_get(server.url("/metrics"), {}, &why);
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
  EXPECT_EQ(why, HttpGetFailure::none);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "x 1\n");
  EXPECT_EQ(ok->content_type, "text/plain; version=0.0.4");

  // A 404 is an answer, not a failure.
  const auto missing = http_get(server.url("/nope"));
  ASSERT_TRUE(missing.has_value());
  EXPECT_EQ(missing->status, 404);
  EXPECT_EQ(missing->body, "not found");
}

TEST(HttpGet, GetterIsReusable) {
  LoopbackHttpServer server([](const std::string& path) { return TestReply{200, path, "", 0}; });
  HttpGetter getter;
  for (const char* path : {"/a", "/b", "/c"}) {
    const auto r = getter.get(server.url(path));
    ASSERT_TRUE(r.has_value()) << r.error().message;
    EXPECT_EQ(r->body, path);
  }
  EXPECT_EQ(server.n_requests(), 3U);
}

TEST(HttpGet, ConnectionRefusedIsANetworkError) {
  const auto port = kvprof::testing::unused_loopback_port();
  HttpGetFailure why = HttpGetFailure::none;
  const auto r = http_get("http://127.0.0.1:" + std::to_string(port) + "/metrics", {}, &why);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, ErrorKind::network);
  EXPECT_EQ(why, HttpGetFailure::connect);
  EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
}

TEST(HttpGet, BodyLargerThanTheBoundFails) {
  LoopbackHttpServer server([](const std::string&) {
    return TestReply{200, std::string(10000, 'x'), "", 0};
  });
  HttpGetOptions options;
  options.max_body_bytes = 1000;
  HttpGetFailure why = HttpGetFailure::none;
  const auto r = http_get(server.url("/big"), options, &why);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(why, HttpGetFailure::too_large);
  options.max_body_bytes = 10000;
  EXPECT_TRUE(http_get(server.url("/big"), options).has_value());
}

TEST(HttpGet, TimeoutFails) {
  LoopbackHttpServer server([](const std::string&) { return TestReply{200, "late", "", 1500}; });
  HttpGetOptions options;
  options.timeout_ms = 200;
  HttpGetFailure why = HttpGetFailure::none;
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = http_get(server.url("/slow"), options, &why);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(why, HttpGetFailure::timeout);
  EXPECT_LT(elapsed, std::chrono::milliseconds(1200));
}

TEST(HttpGet, CancelFlagEndsTheRequest) {
  LoopbackHttpServer server([](const std::string&) { return TestReply{200, "late", "", 3000}; });
  std::atomic<bool> cancel{false};
  HttpGetOptions options;
  options.timeout_ms = 10000;
  options.cancel = &cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancel.store(true);
  });
  HttpGetFailure why = HttpGetFailure::none;
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = http_get(server.url("/slow"), options, &why);
  const auto elapsed = std::chrono::steady_clock::now() - t0;
  canceller.join();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(why, HttpGetFailure::cancelled);
  EXPECT_LT(elapsed, std::chrono::milliseconds(2000));
}

TEST(HttpGet, MalformedUrlIsAnInputError) {
  const auto r = http_get("ftp://example.invalid/x");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, ErrorKind::input);
}

}  // namespace
}  // namespace kvprof::client
