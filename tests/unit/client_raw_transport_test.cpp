// Tests for src/kvprof/client/raw_transport.cpp, side by side with the libcurl transport: the
// same scripted server bytes must give the same body, status and outcome over both (server
// faults, hostile framing, timeouts, refused connects), plus keep-alive reuse, the retry on a
// stale kept-alive connection, cancel and abort.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kvprof/client/transport.hpp"
#include "support/scripted_http_server.hpp"

namespace kvprof::client {
namespace {

using testing::AfterResponse;
using testing::http_head;
using testing::ScriptedHttpServer;
using Conn = ScriptedHttpServer::Connection;

struct RecordingSink final : StreamSink {
  std::vector<int> statuses;
  std::string body;
  std::vector<int64_t> arrivals_ns;  // one per on_data
  int n_done = 0;
  TransportResult result;
  size_t abort_after_bytes = SIZE_MAX;
  bool data_after_done = false;

  void on_status(int http_status) override { statuses.push_back(http_status); }
  bool on_data(std::string_view bytes, int64_t arrival_ns) override {
    if (n_done > 0) data_after_done = true;
    arrivals_ns.push_back(arrival_ns);
    body.append(bytes);
    return body.size() < abort_after_bytes;
  }
  void on_done(const TransportResult& r) override {
    ++n_done;
    result = r;
  }
};

HttpRequest post(const std::string& url, double timeout_s = 20.0) {
  HttpRequest r;
  r.url = url;
  r.body = R"({"prompt":[1,2,3],"stream":true})";
  r.headers = {"Authorization: Bearer test"};
  r.timeout_s = timeout_s;
  r.connect_timeout_s = 5.0;
  return r;
}

// Polls until every sink is done; a test failure (not a hang) when that takes implausibly long.
void drive(Transport& t, const std::vector<RecordingSink*>& sinks) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    bool all = true;
    for (const auto* s : sinks)
      all = all && s->n_done > 0;
    if (all) return;
    ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "transfers never ended";
    t.poll(20);
  }
}

// One request of `script`'s server over `kind`; returns the finished sink.
RecordingSink fetch_one(TransportKind kind, const ScriptedHttpServer& server,
                        double timeout_s = 20.0) {
  auto transport = make_transport(kind, server.url());
  RecordingSink sink;
  transport->start(post(server.url(), timeout_s), &sink);
  drive(*transport, {&sink});
  EXPECT_EQ(sink.n_done, 1);
  EXPECT_FALSE(sink.data_after_done);
  return sink;
}

std::string sse(int i) {
  return "data: {\"choices\":[{\"text\":\" tok" + std::to_string(i) + "\"}]}\n\n";
}

std::string chunk(std::string_view payload, std::string_view ext = "") {
  char size[32];
  std::snprintf(size, sizeof size, "%zx", payload.size());
  return std::string(size) + std::string(ext) + "\r\n" + std::string(payload) + "\r\n";
}

std::string chunked_stream(int n_events) {
  std::string out =
      http_head(200, {"Content-Type: text/event-stream", "Transfer-Encoding: chunked"});
  for (int i = 0; i < n_events; ++i)
    out += chunk(sse(i), i % 2 ? ";ext=1" : "");
  return out + chunk("data: [DONE]\n\n") + "0\r\nX-Trailer: t\r\n\r\n";
}

std::string expected_body(int n_events) {
  std::string out;
  for (int i = 0; i < n_events; ++i)
    out += sse(i);
  return out + "data: [DONE]\n\n";
}

class TransportTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(TransportTest, ChunkedStreamArrivesWholeEvenOneByteAtATime) {
  for (const size_t piece_bytes : {size_t{0}, size_t{1}, size_t{7}}) {
    ScriptedHttpServer server([&](Conn& c, uint64_t) {
      EXPECT_NE(c.request_head().find("POST /v1/completions HTTP/1.1\r\n"), std::string::npos);
      EXPECT_NE(c.request_head().find("Authorization: Bearer test\r\n"), std::string::npos);
      EXPECT_EQ(c.request_body(), R"({"prompt":[1,2,3],"stream":true})");
      c.write(chunked_stream(20), piece_bytes);
      return AfterResponse::keep;
    });
    const RecordingSink s = fetch_one(GetParam(), server);
    EXPECT_EQ(s.result.outcome, TransportOutcome::ok) << s.result.message;
    EXPECT_EQ(s.statuses, std::vector<int>{200});
    EXPECT_EQ(s.body, expected_body(20)) << "pieces of " << piece_bytes;
  }
}

TEST_P(TransportTest, ContentLengthAndCloseDelimitedBodies) {
  ScriptedHttpServer length([](Conn& c, uint64_t) {
    c.write(http_head(200, {"Content-Length: 5"}) + "hello");
    return AfterResponse::keep;
  });
  RecordingSink s = fetch_one(GetParam(), length);
  EXPECT_EQ(s.result.outcome, TransportOutcome::ok) << s.result.message;
  EXPECT_EQ(s.body, "hello");

  ScriptedHttpServer closing([](Conn& c, uint64_t) {
    c.write(http_head(200, {"Content-Type: text/event-stream"}) + sse(0) + sse(1), 3);
    return AfterResponse::close;
  });
  s = fetch_one(GetParam(), closing);
  EXPECT_EQ(s.result.outcome, TransportOutcome::ok) << s.result.message;
  EXPECT_EQ(s.body, sse(0) + sse(1));
}

TEST_P(TransportTest, ServerErrorStatusIsAResponseNotAFailure) {
  ScriptedHttpServer server([](Conn& c, uint64_t) {
    const std::string body = R"({"error":{"message":"engine crashed"}})";
    c.write(http_head(503, {"Content-Length: " + std::to_string(body.size())}) + body);
    return AfterResponse::keep;
  });
  const RecordingSink s = fetch_one(GetParam(), server);
  EXPECT_EQ(s.result.outcome, TransportOutcome::ok) << s.result.message;
  EXPECT_EQ(s.statuses, std::vector<int>{503});
  EXPECT_NE(s.body.find("engine crashed"), std::string::npos);
}

TEST_P(TransportTest, ResetOrCloseMidStreamIsAReset) {
  for (const AfterResponse after : {AfterResponse::reset, AfterResponse::close}) {
    ScriptedHttpServer server([&](Conn& c, uint64_t) {
      std::string partial = chunked_stream(10);
      c.write(partial.substr(0, partial.size() / 2));
      c.wait_ms(50);  // let the client read the first half before the fault
      return after;
    });
    const RecordingSink s = fetch_one(GetParam(), server);
    EXPECT_EQ(s.result.outcome, TransportOutcome::reset) << s.result.message;
    EXPECT_FALSE(s.result.message.empty());
    EXPECT_EQ(s.statuses, std::vector<int>{200});
    EXPECT_FALSE(s.body.empty());
  }
  // A Content-Length body cut short, and a close before any response byte.
  ScriptedHttpServer short_body([](Conn& c, uint64_t) {
    c.write(http_head(200, {"Content-Length: 100"}) + "only this");
    return AfterResponse::close;
  });
  EXPECT_EQ(fetch_one(GetParam(), short_body).result.outcome, TransportOutcome::reset);
  ScriptedHttpServer nothing([](Conn&, uint64_t) { return AfterResponse::close; });
  const RecordingSink s = fetch_one(GetParam(), nothing);
  EXPECT_EQ(s.result.outcome, TransportOutcome::reset) << s.result.message;
  EXPECT_TRUE(s.statuses.empty());
}

TEST_P(TransportTest, BadChunkSizeIsAReset) {
  ScriptedHttpServer server([](Conn& c, uint64_t) {
    c.write(http_head(200, {"Transfer-Encoding: chunked"}) + chunk(sse(0)) +
            "zz\r\nbogus\r\n0\r\n\r\n");
    return AfterResponse::keep;
  });
  const RecordingSink s = fetch_one(GetParam(), server);
  EXPECT_EQ(s.result.outcome, TransportOutcome::reset) << s.result.message;
  EXPECT_EQ(s.body, sse(0));
}

TEST_P(TransportTest, MalformedStatusLineIsNotOk) {
  ScriptedHttpServer server([](Conn& c, uint64_t) {
    c.write("SPDY/9 200 whatever\r\n\r\nbody");
    return AfterResponse::close;
  });
  const RecordingSink s = fetch_one(GetParam(), server);
  // A malformed response after the request went out: other on both (libcurl calls it HTTP/0.9).
  EXPECT_EQ(s.result.outcome, TransportOutcome::other) << s.result.message;
  EXPECT_FALSE(s.result.message.empty());
  EXPECT_TRUE(s.statuses.empty());
}

TEST_P(TransportTest, OversizedHeadersFail) {
  ScriptedHttpServer server([](Conn& c, uint64_t) {
    c.write(http_head(200, {"X-Big: " + std::string(300 * 1024, 'a'), "Content-Length: 2"}) + "ok");
    return AfterResponse::close;
  });
  const RecordingSink s = fetch_one(GetParam(), server);
  EXPECT_EQ(s.result.outcome, TransportOutcome::other) << s.result.message;
  EXPECT_NE(s.body, "ok");
}

TEST_P(TransportTest, SlowServerHitsTheRequestTimeout) {
  ScriptedHttpServer server([](Conn& c, uint64_t) {
    c.write(http_head(200, {"Transfer-Encoding: chunked"}) + chunk(sse(0)));
    c.wait_ms(10'000);  // ends early when the test's server goes away
    return AfterResponse::close;
  });
  const RecordingSink s = fetch_one(GetParam(), server, 0.3);
  EXPECT_EQ(s.result.outcome, TransportOutcome::timeout) << s.result.message;
  EXPECT_EQ(s.body, sse(0));
}

TEST_P(TransportTest, SilentServerHitsTheRequestTimeout) {
  ScriptedHttpServer server([](Conn& c, uint64_t) {
    c.wait_ms(10'000);
    return AfterResponse::close;
  });
  const RecordingSink s = fetch_one(GetParam(), server, 0.3);
  EXPECT_EQ(s.result.outcome, TransportOutcome::timeout) << s.result.message;
  EXPECT_TRUE(s.statuses.empty());
}

TEST_P(TransportTest, RefusedConnectIsConnect) {
  uint16_t port = 0;
  {
    ScriptedHttpServer probe([](Conn&, uint64_t) { return AfterResponse::close; });
    port = probe.port();
  }
  auto transport = make_transport(GetParam(), "http://127.0.0.1");
  RecordingSink a, b;
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/v1/completions";
  transport->start(post(url), &a);
  transport->start(post(url), &b);
  drive(*transport, {&a, &b});
  for (const auto* s : {&a, &b}) {
    EXPECT_EQ(s->n_done, 1);
    EXPECT_EQ(s->result.outcome, TransportOutcome::connect) << s->result.message;
    EXPECT_TRUE(s->statuses.empty());
  }
}

TEST_P(TransportTest, ConnectThatNeverCompletesIsConnect) {
  // A listener that never accepts, its backlog filled: further SYNs go unanswered.
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 0), 0);
  socklen_t len = sizeof addr;
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fillers.push_back(fd);
  }
  usleep(100'000);
  auto transport = make_transport(GetParam(), "http://127.0.0.1");
  RecordingSink s;
  HttpRequest r = post("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/");
  r.connect_timeout_s = 0.3;
  transport->start(r, &s);
  drive(*transport, {&s});
  EXPECT_EQ(s.result.outcome, TransportOutcome::connect) << s.result.message;
  for (const int fd : fillers)
    close(fd);
  close(listener);
}

TEST_P(TransportTest, SinkAbortAndCancelEndTheTransfer) {
  const auto half_then_wait = [](Conn& c, uint64_t) {
    const std::string wire = chunked_stream(50);
    c.write(wire.substr(0, wire.size() / 2));
    c.wait_ms(10'000);  // ends early when the test's server goes away
    return AfterResponse::close;
  };
  ScriptedHttpServer abort_server(half_then_wait);
  auto transport = make_transport(GetParam(), abort_server.url());
  RecordingSink aborting;
  aborting.abort_after_bytes = 10;
  transport->start(post(abort_server.url()), &aborting);
  drive(*transport, {&aborting});
  EXPECT_EQ(aborting.result.outcome, TransportOutcome::aborted) << aborting.result.message;
  EXPECT_FALSE(aborting.data_after_done);

  ScriptedHttpServer cancel_server(half_then_wait);
  RecordingSink cancelled;
  const uint64_t handle = transport->start(post(cancel_server.url()), &cancelled);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (cancelled.body.empty() && cancelled.n_done == 0 &&
         std::chrono::steady_clock::now() < give_up) {
    transport->poll(20);
  }
  ASSERT_FALSE(cancelled.body.empty());
  transport->cancel(handle);
  EXPECT_EQ(cancelled.n_done, 1);
  EXPECT_EQ(cancelled.result.outcome, TransportOutcome::cancelled);
  transport->cancel(handle);  // unknown now: ignored
  transport->cancel(12345);
  EXPECT_EQ(transport->poll(0), 0u);
  EXPECT_EQ(cancelled.n_done, 1);
  EXPECT_FALSE(cancelled.data_after_done);
}

TEST_P(TransportTest, KeepAliveReusesOneConnection) {
  ScriptedHttpServer server([](Conn& c, uint64_t i) {
    c.write(i % 2 ? chunked_stream(3) : http_head(200, {"Content-Length: 2"}) + "ok");
    return AfterResponse::keep;
  });
  auto transport = make_transport(GetParam(), server.url());
  for (int i = 0; i < 6; ++i) {
    RecordingSink s;
    transport->start(post(server.url()), &s);
    drive(*transport, {&s});
    EXPECT_EQ(s.result.outcome, TransportOutcome::ok) << s.result.message;
    EXPECT_EQ(s.body, i % 2 ? expected_body(3) : "ok");
  }
  EXPECT_EQ(server.requests(), 6u);
  EXPECT_EQ(server.connections(), 1u);
}

TEST_P(TransportTest, StaleKeptAliveConnectionIsRetriedOnANewOne) {
  // Each response looks reusable but the server closes right after it.
  ScriptedHttpServer server([](Conn& c, uint64_t) {
    c.write(http_head(200, {"Content-Length: 2"}) + "ok");
    return AfterResponse::close;
  });
  auto transport = make_transport(GetParam(), server.url());
  for (int i = 0; i < 4; ++i) {
    RecordingSink s;
    transport->start(post(server.url()), &s);
    drive(*transport, {&s});
    EXPECT_EQ(s.result.outcome, TransportOutcome::ok) << i << ": " << s.result.message;
    EXPECT_EQ(s.body, "ok");
  }
  EXPECT_EQ(server.requests(), 4u);
  EXPECT_EQ(server.connections(), 4u);
}

TEST_P(TransportTest, ConnectionCloseHeaderIsHonoured) {
  ScriptedHttpServer server([](Conn& c, uint64_t) {
    c.write(http_head(200, {"Content-Length: 2", "Connection: close"}) + "ok");
    c.wait_ms(200);  // the client must not wait for this close to finish
    return AfterResponse::close;
  });
  auto transport = make_transport(GetParam(), server.url());
  RecordingSink a, b;
  transport->start(post(server.url()), &a);
  drive(*transport, {&a});
  transport->start(post(server.url()), &b);
  drive(*transport, {&b});
  EXPECT_EQ(a.result.outcome, TransportOutcome::ok);
  EXPECT_EQ(b.result.outcome, TransportOutcome::ok) << b.result.message;
  EXPECT_EQ(server.connections(), 2u);
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportTest,
                         ::testing::Values(TransportKind::raw, TransportKind::curl),
                         [](const ::testing::TestParamInfo<TransportKind>& param_info) {
                           return std::string(transport_kind_name(param_info.param));
                         });

TEST(RawTransport, RejectsWhatItCannotSendWithoutTouchingTheNetwork) {
  auto transport = make_raw_transport();
  RecordingSink https, injected, unresolvable;
  transport->start(post("https://127.0.0.1:1/"), &https);
  HttpRequest bad = post("http://127.0.0.1:1/");
  bad.headers = {"X: a\r\nEvil: b"};
  transport->start(bad, &injected);
  transport->start(post("http://no-such-host.invalid/"), &unresolvable);
  // Nothing is reported before poll(), so a sink never hears of a transfer inside start().
  EXPECT_EQ(https.n_done + injected.n_done + unresolvable.n_done, 0);
  drive(*transport, {&https, &injected, &unresolvable});
  EXPECT_EQ(https.result.outcome, TransportOutcome::connect);
  EXPECT_EQ(injected.result.outcome, TransportOutcome::other);
  EXPECT_EQ(unresolvable.result.outcome, TransportOutcome::connect);
  EXPECT_EQ(transport->poll(0), 0u);
}

TEST(RawTransport, ManyConcurrentStreamsOnOneLoop) {
  ScriptedHttpServer server([](Conn& c, uint64_t) {
    c.write(chunked_stream(5));
    return AfterResponse::close;
  });
  auto transport = make_raw_transport();
  // The scripted server serves one connection at a time (closing each), so the transfers wait
  // for each other on separate connections; all must still end well.
  std::vector<std::unique_ptr<RecordingSink>> sinks;
  std::vector<RecordingSink*> raw;
  for (int i = 0; i < 20; ++i) {
    sinks.push_back(std::make_unique<RecordingSink>());
    raw.push_back(sinks.back().get());
    transport->start(post(server.url()), raw.back());
  }
  EXPECT_EQ(transport->poll(0), 20u);
  drive(*transport, raw);
  for (const auto* s : raw) {
    EXPECT_EQ(s->result.outcome, TransportOutcome::ok) << s->result.message;
    EXPECT_EQ(s->body, expected_body(5));
  }
}

TEST(RawTransport, DataIsTimedByTheKernelsReceiveTimeNotByWhenItWasRead) {
  std::atomic<bool> got_request{false}, client_read{false};
  std::atomic<int64_t> before_write_ns{0}, after_write_ns{0};
  ScriptedHttpServer server([&](Conn& c, uint64_t) {
    got_request = true;
    c.wait_ms(20);
    before_write_ns = monotonic_now_ns();
    c.write(http_head(200, {"Content-Type: text/event-stream", "Transfer-Encoding: chunked"}) +
            chunk(sse(0)));
    after_write_ns = monotonic_now_ns();
    // The rest only once the first event was read, so that read holds it alone.
    for (int i = 0; i < 5000 && !client_read; ++i)
      c.wait_ms(1);
    c.write(chunk("data: [DONE]\n\n") + "0\r\n\r\n");
    return AfterResponse::close;
  });
  auto transport = make_raw_transport();
  RecordingSink sink;
  transport->start(post(server.url()), &sink);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!got_request && std::chrono::steady_clock::now() < give_up)
    transport->poll(5);
  while (after_write_ns == 0 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // The first event sits in the socket while nothing reads it.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const int64_t resumed_ns = monotonic_now_ns();
  while (sink.arrivals_ns.empty() && std::chrono::steady_clock::now() < give_up)
    transport->poll(5);
  client_read = true;
  drive(*transport, {&sink});
  ASSERT_EQ(sink.result.outcome, TransportOutcome::ok) << sink.result.message;
  ASSERT_FALSE(sink.arrivals_ns.empty());
  EXPECT_GE(sink.arrivals_ns[0], before_write_ns.load());
  EXPECT_LE(sink.arrivals_ns[0], after_write_ns.load() + 20'000'000);
  EXPECT_LT(sink.arrivals_ns[0], resumed_ns - 100'000'000);
  EXPECT_TRUE(std::is_sorted(sink.arrivals_ns.begin(), sink.arrivals_ns.end()));
  EXPECT_GE(transport->counters().kernel_timestamped_reads, 1u);
  EXPECT_LE(transport->counters().kernel_timestamped_reads, transport->counters().reads);
}

TEST(RawTransport, ReadIntervalGathersABusyStreamIntoFewerReads) {
  constexpr int k_events = 40;
  ScriptedHttpServer server([&](Conn& c, uint64_t) {
    c.write(http_head(200, {"Content-Type: text/event-stream", "Transfer-Encoding: chunked"}));
    for (int i = 0; i < k_events; ++i) {
      c.write(chunk(sse(i)));
      c.wait_ms(5);
    }
    c.write(chunk("data: [DONE]\n\n") + "0\r\n\r\n");
    return AfterResponse::keep;
  });
  const auto run = [&](uint32_t read_interval_us) {
    RawOptions options;
    options.read_interval_us = read_interval_us;
    auto transport = make_raw_transport(options);
    RecordingSink sink;
    transport->start(post(server.url()), &sink);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (sink.n_done == 0 && std::chrono::steady_clock::now() < give_up)
      transport->poll(500);  // long enough not to cut the interval short
    EXPECT_EQ(sink.result.outcome, TransportOutcome::ok) << sink.result.message;
    EXPECT_EQ(sink.body, expected_body(k_events));
    EXPECT_TRUE(std::is_sorted(sink.arrivals_ns.begin(), sink.arrivals_ns.end()));
    return transport->counters().reads;
  };
  // 40 events 5 ms apart: read as they come, then once per 100 ms.
  EXPECT_GE(run(0), 15u);
  EXPECT_LE(run(100'000), 8u);
}

}  // namespace
}  // namespace kvprof::client
