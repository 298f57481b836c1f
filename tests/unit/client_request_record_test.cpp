// Tests for src/kvprof/client/request_record.cpp: how ResponseSink classifies endings and times
// tokens, driven directly without a transport.
#include "kvprof/client/request_record.hpp"

#include <gtest/gtest.h>

namespace kvprof::client {
namespace {

struct Harness {
  int64_t clock_ns = 0;
  bool finished = false;
  ResponseSink sink;
  explicit Harness(uint32_t max_tokens = 2)
      : sink(make_record(max_tokens), RunClock{0, [this] { return clock_ns; }}, true,
             [this](ResponseSink&) { finished = true; }) {}
  static RequestRecord make_record(uint32_t max_tokens) {
    RequestRecord r;
    r.request_id = 1;
    r.input_len = 3;
    r.max_tokens = max_tokens;
    r.intended_send_ns = 0;
    r.actual_send_ns = 1'000'000;
    return r;
  }
};

const std::string k_tok = "data: {\"choices\":[{\"text\":\"a\"}]}\n\n";
const std::string k_usage =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n";

TEST(ResponseSink, OkStreamTimesEveryToken) {
  Harness h;
  h.sink.on_status(200);
  h.clock_ns = 10'000'000;
  EXPECT_TRUE(h.sink.on_data(k_tok, h.clock_ns));
  h.clock_ns = 25'000'000;
  EXPECT_TRUE(h.sink.on_data(k_tok + k_usage + "data: [DONE]\n\n", h.clock_ns));
  h.clock_ns = 26'000'000;
  h.sink.on_done({TransportOutcome::ok, ""});
  const auto& r = h.sink.record();
  EXPECT_TRUE(h.finished);
  EXPECT_EQ(r.status, RequestStatus::ok);
  EXPECT_EQ(r.failure, FailureKind::none);
  EXPECT_DOUBLE_EQ(r.ttft_ms(), 10.0);
  EXPECT_DOUBLE_EQ(r.e2e_ms(), 26.0);
  ASSERT_EQ(r.chunks.size(), 2u);
  EXPECT_EQ(r.chunks[1].t_ns, 25'000'000);
  EXPECT_EQ(r.tokens_streamed, 2u);
  ASSERT_TRUE(r.usage);
  EXPECT_EQ(r.completion_tokens(), 2u);
  EXPECT_TRUE(r.warning.empty());
}

TEST(ResponseSink, TokensAreTimedByArrivalNotByWhenTheyAreHandedOver) {
  Harness h;
  h.sink.on_status(200);
  h.clock_ns = 40'000'000;  // read late: the bytes came at 12 and 30 ms
  EXPECT_TRUE(h.sink.on_data(k_tok, 12'000'000));
  EXPECT_TRUE(h.sink.on_data(k_tok, 30'000'000));
  // A later read stamped earlier (a clock step) keeps the order.
  EXPECT_TRUE(h.sink.on_data(k_usage + "data: [DONE]\n\n", 29'000'000));
  h.clock_ns = 50'000'000;
  h.sink.on_done({TransportOutcome::ok, "", 33'000'000});
  const auto& r = h.sink.record();
  EXPECT_EQ(r.status, RequestStatus::ok);
  ASSERT_EQ(r.chunks.size(), 2u);
  EXPECT_EQ(r.chunks[0].t_ns, 12'000'000);
  EXPECT_EQ(r.chunks[1].t_ns, 30'000'000);
  EXPECT_DOUBLE_EQ(r.ttft_ms(), 12.0);
  EXPECT_DOUBLE_EQ(r.e2e_ms(), 33.0);  // when the last bytes came, not when on_done ran

  Harness unknown;  // a transport that does not know when the end came: the clock at on_done
  unknown.sink.on_status(200);
  unknown.sink.on_data(k_tok + k_tok + k_usage + "data: [DONE]\n\n", 5'000'000);
  unknown.clock_ns = 7'000'000;
  unknown.sink.on_done({TransportOutcome::ok, ""});
  EXPECT_DOUBLE_EQ(unknown.sink.record().e2e_ms(), 7.0);
}

TEST(ResponseSink, UsageDifferentFromAskedIsAWarning) {
  Harness h(5);
  h.sink.on_status(200);
  h.sink.on_data(k_tok + k_usage + "data: [DONE]\n\n", h.clock_ns);
  h.sink.on_done({TransportOutcome::ok, ""});
  EXPECT_EQ(h.sink.record().status, RequestStatus::ok);
  EXPECT_NE(h.sink.record().warning.find("completion_tokens 2 != max_tokens 5"), std::string::npos);
}

TEST(ResponseSink, TokensPastMaxTokensAreAServerFaultThatEndsTheStream) {
  // A server that keeps streaming: the request ends at the first token too many.
  Harness h(3);
  h.sink.on_status(200);
  EXPECT_TRUE(h.sink.on_data(k_tok + k_tok + k_tok, h.clock_ns));
  EXPECT_FALSE(h.sink.on_data(k_tok, h.clock_ns));
  h.sink.on_done({TransportOutcome::aborted, ""});
  const auto& r = h.sink.record();
  EXPECT_EQ(r.status, RequestStatus::error);
  EXPECT_EQ(r.failure, FailureKind::malformed_sse);
  EXPECT_NE(r.error_text.find("more tokens than max_tokens (3)"), std::string::npos)
      << r.error_text;
  EXPECT_EQ(r.tokens_streamed, 4u);
}

TEST(ResponseSink, NothingAfterDoneCounts) {
  Harness h(2);
  h.sink.on_status(200);
  EXPECT_FALSE(
      h.sink.on_data(k_tok + k_tok + k_usage + "data: [DONE]\n\n" + k_tok + k_tok, h.clock_ns));
  h.sink.on_done({TransportOutcome::aborted, ""});
  const auto& r = h.sink.record();
  EXPECT_EQ(r.status, RequestStatus::ok) << r.error_text;
  EXPECT_EQ(r.tokens_streamed, 2u);
  EXPECT_EQ(r.chunks.size(), 2u);
}

TEST(ResponseSink, ADoneAtTheEndOfAReadKeepsTheConnectionReading) {
  // [DONE] last in a read: the stream is read on (to its clean end, so keep-alive can reuse it).
  Harness h(2);
  h.sink.on_status(200);
  EXPECT_TRUE(h.sink.on_data(k_tok + k_tok + k_usage + "data: [DONE]\n\n", h.clock_ns));
  h.sink.on_done({TransportOutcome::ok, ""});
  EXPECT_EQ(h.sink.record().status, RequestStatus::ok);
}

TEST(ResponseSink, AUsageOverMaxTokensIsNotBelieved) {
  Harness h(2);
  h.sink.on_status(200);
  h.sink.on_data(k_tok + k_tok +
                     "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,"
                     "\"completion_tokens\":1000000000000000}}\n\ndata: [DONE]\n\n",
                 h.clock_ns);
  h.sink.on_done({TransportOutcome::ok, ""});
  const auto& r = h.sink.record();
  EXPECT_EQ(r.status, RequestStatus::ok);
  EXPECT_FALSE(r.usage_trusted);
  EXPECT_EQ(r.completion_tokens(), 2u);
  EXPECT_NE(r.warning.find("usage says 1000000000000000 completion tokens, more than max_tokens 2"),
            std::string::npos)
      << r.warning;
}

TEST(ResponseSink, ALongGenerationKeepsBoundedTokenTimesWithEveryToken) {
  constexpr uint32_t k_tokens = 140'000;
  Harness h(k_tokens);
  h.sink.on_status(200);
  for (uint32_t i = 0; i < k_tokens; ++i) {
    h.clock_ns = 1'000'000 + int64_t{i} * 10'000;
    ASSERT_TRUE(h.sink.on_data(k_tok, h.clock_ns));
  }
  h.sink.on_data("data: [DONE]\n\n", h.clock_ns);
  h.sink.on_done({TransportOutcome::ok, ""});
  const auto& r = h.sink.record();
  EXPECT_EQ(r.status, RequestStatus::ok) << r.error_text;
  EXPECT_EQ(r.tokens_streamed, k_tokens);
  ASSERT_LE(r.chunks.size(), k_max_token_chunks);
  uint64_t sum = 0;
  for (const auto& c : r.chunks)
    sum += c.n_tokens;
  EXPECT_EQ(sum, k_tokens);
  EXPECT_EQ(r.chunks.front().t_ns, 1'000'000);  // the first token's time is kept
  EXPECT_EQ(r.chunks.front().n_tokens, 1u);
  EXPECT_EQ(r.chunks.back().t_ns, 1'000'000 + int64_t{k_tokens - 1} * 10'000);  // and the last
  for (size_t i = 1; i < r.chunks.size(); ++i)
    ASSERT_LT(r.chunks[i - 1].t_ns, r.chunks[i].t_ns);
}

TEST(ResponseSink, HttpStatusesMapToKindsWithTheServerMessage) {
  for (const auto& [status, kind] :
       {std::pair{429, FailureKind::http_429}, std::pair{404, FailureKind::http_4xx},
        std::pair{503, FailureKind::http_5xx}}) {
    Harness h;
    h.sink.on_status(status);
    h.sink.on_data(R"({"error":{"message":"no such model"}})", h.clock_ns);
    h.sink.on_done({TransportOutcome::ok, ""});
    EXPECT_EQ(h.sink.record().status, RequestStatus::error);
    EXPECT_EQ(h.sink.record().failure, kind) << status;
    EXPECT_NE(h.sink.record().error_text.find("no such model"), std::string::npos);
  }
  // A redirect is not a client error: it says what it is.
  Harness h;
  h.sink.on_status(302);
  h.sink.on_done({TransportOutcome::ok, ""});
  EXPECT_EQ(h.sink.record().failure, FailureKind::other);
  EXPECT_NE(h.sink.record().error_text.find("HTTP 302 (a redirect: kvprof does not follow"),
            std::string::npos)
      << h.sink.record().error_text;
}

TEST(ResponseSink, ErrorPayloadStopsTheStream) {
  Harness h;
  h.sink.on_status(200);
  EXPECT_FALSE(
      h.sink.on_data(k_tok + "data: {\"error\":{\"message\":\"kv cache full\"}}\n\n", h.clock_ns));
  h.sink.on_done({TransportOutcome::aborted, ""});
  EXPECT_EQ(h.sink.record().failure, FailureKind::server_error);
  EXPECT_EQ(h.sink.record().error_text, "kv cache full");
  EXPECT_EQ(h.sink.record().tokens_streamed, 1u);
}

TEST(ResponseSink, MalformedJsonOrMissingDoneIsMalformedSse) {
  Harness bad;
  bad.sink.on_status(200);
  EXPECT_FALSE(bad.sink.on_data("data: {nope\n\n", bad.clock_ns));
  bad.sink.on_done({TransportOutcome::aborted, ""});
  EXPECT_EQ(bad.sink.record().failure, FailureKind::malformed_sse);

  Harness cut;
  cut.sink.on_status(200);
  cut.sink.on_data(k_tok + "data: {\"choi", cut.clock_ns);
  cut.sink.on_done({TransportOutcome::ok, ""});
  EXPECT_EQ(cut.sink.record().failure, FailureKind::malformed_sse);
  EXPECT_NE(cut.sink.record().error_text.find("inside an event"), std::string::npos);
}

TEST(ResponseSink, TransportOutcomesMapToKinds) {
  for (const auto& [outcome, kind] : {std::pair{TransportOutcome::connect, FailureKind::connect},
                                      std::pair{TransportOutcome::reset, FailureKind::reset},
                                      std::pair{TransportOutcome::timeout, FailureKind::timeout},
                                      std::pair{TransportOutcome::other, FailureKind::other}}) {
    Harness h;
    h.sink.on_done({outcome, "why"});
    EXPECT_EQ(h.sink.record().failure, kind);
    EXPECT_EQ(h.sink.record().status, RequestStatus::error);
    EXPECT_EQ(h.sink.record().error_text, "why");
  }
  Harness c;
  c.sink.on_done({TransportOutcome::cancelled, ""});
  EXPECT_EQ(c.sink.record().status, RequestStatus::cancelled);
}

TEST(ResponseSink, OversizedEventIsMalformed) {
  Harness h;
  h.sink.on_status(200);
  EXPECT_FALSE(h.sink.on_data("data: " + std::string(SseParser::k_default_max_event_bytes, 'x'),
                              h.clock_ns));
  h.sink.on_done({TransportOutcome::aborted, ""});
  EXPECT_EQ(h.sink.record().failure, FailureKind::malformed_sse);
}

}  // namespace
}  // namespace kvprof::client
