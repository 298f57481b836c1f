// Tests for src/kvprof/client/runner.cpp over both real transports (raw_transport.cpp and
// curl_transport.cpp) against the loopback stream server (tests/support/stream_server.hpp),
// with faults.
#include "kvprof/client/runner.hpp"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "support/stream_server.hpp"

namespace kvprof::client {
namespace {

using testing::Fault;
using testing::StreamServer;
using testing::StreamServerOptions;
using workload::RequestSpec;

std::vector<RequestSpec> closed_requests(size_t n, uint32_t concurrency, uint32_t max_tokens,
                                         const std::string& condition = "c") {
  std::vector<RequestSpec> out;
  for (size_t i = 0; i < n; ++i) {
    RequestSpec r;
    r.request_id = i;
    r.condition_id = condition;
    r.input_len = 4;
    r.output_len = max_tokens;
    r.max_tokens = max_tokens;
    r.concurrency = concurrency;
    r.prompt_token_ids = {1000, 1001, 1002, static_cast<uint32_t>(1003 + i)};
    out.push_back(r);
  }
  return out;
}

struct Collected {
  std::vector<RequestRecord> records;
  RunResult result;
};

class RequestRunnerTest : public ::testing::TestWithParam<TransportKind> {
 protected:
  // Runs `requests` against `url` over the transport under test.
  Collected run_against(const std::string& url, const std::vector<RequestSpec>& requests,
                        RunOptions options = {}) const;
  std::unique_ptr<Transport> transport(const std::string& url) const {
    return make_transport(GetParam(), url);
  }
};

Collected RequestRunnerTest::run_against(const std::string& url,
                                         const std::vector<RequestSpec>& requests,
                                         RunOptions options) const {
  options.endpoint = url;
  RequestRunner runner(options, transport(url));
  Collected c;
  runner.set_on_record([&](const RequestRecord& r) -> Expected<void> {
    c.records.push_back(r);
    return {};
  });
  c.result = runner.run(requests).value();
  return c;
}

void expect_well_ordered(const RequestRecord& r) {
  EXPECT_LE(r.intended_send_ns, r.actual_send_ns);
  EXPECT_NE(r.end_ns, k_no_time);
  EXPECT_LE(r.actual_send_ns, r.end_ns);
  if (r.first_token_ns != k_no_time) {
    EXPECT_LE(r.actual_send_ns, r.first_token_ns);
    EXPECT_LE(r.first_token_ns, r.end_ns);
    EXPECT_LE(r.ttft_ms(), r.e2e_ms());
  }
  for (size_t i = 1; i < r.chunks.size(); ++i)
    EXPECT_LE(r.chunks[i - 1].t_ns, r.chunks[i].t_ns);
}

TEST_P(RequestRunnerTest, StreamsEveryRequestAndReusesConnections) {
  StreamServerOptions so;
  so.token_delay_us = 200;
  StreamServer server(so);
  const auto requests = closed_requests(24, 4, 16);
  RunOptions options;
  options.model = "fake-model";
  options.api_key = "sk-secret";
  const Collected c = run_against(server.url(), requests, options);
  ASSERT_EQ(c.records.size(), 24u);
  for (const auto& r : c.records) {
    EXPECT_EQ(r.status, RequestStatus::ok) << r.error_text;
    EXPECT_EQ(r.http_status, 200);
    EXPECT_EQ(r.tokens_streamed, 16u);
    ASSERT_TRUE(r.usage);
    EXPECT_EQ(r.usage->prompt_tokens, 4u);
    EXPECT_EQ(r.usage->completion_tokens, 16u);
    EXPECT_EQ(r.chunks.size(), 16u);
    EXPECT_EQ(r.finish_reason, "length");
    expect_well_ordered(r);
  }
  ASSERT_EQ(c.result.conditions.size(), 1u);
  const auto& s = c.result.conditions[0];
  EXPECT_EQ(s.n_ok, 24u);
  EXPECT_EQ(s.output_tokens, 24u * 16u);
  EXPECT_GT(s.output_tokens_per_s, 0);
  EXPECT_EQ(c.result.max_in_flight, 4u);
  EXPECT_EQ(server.requests_seen(), 24u);
  EXPECT_LE(server.connections_seen(), 8u);  // keep-alive: far fewer connections than requests
  const auto body = nlohmann::json::parse(server.bodies().at(0));
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_EQ(body["prompt"].size(), 4u);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
}

TEST_P(RequestRunnerTest, ChatApiWithTextPrompts) {
  StreamServer server({});
  auto requests = closed_requests(3, 2, 5);
  for (auto& r : requests) {
    r.prompt_format = workload::PromptFormat::text;
    r.prompt_token_ids.clear();
    r.prompt_text = "the of and to";
  }
  RunOptions options;
  options.api = ApiKind::chat;
  const Collected c = run_against(server.url(), requests, options);
  for (const auto& r : c.records) {
    EXPECT_EQ(r.status, RequestStatus::ok) << r.error_text;
    EXPECT_EQ(r.tokens_streamed, 5u);
    EXPECT_TRUE(r.warning.empty()) << r.warning;  // text prompts: prompt_tokens not compared
  }
  EXPECT_TRUE(nlohmann::json::parse(server.bodies().at(0)).contains("messages"));
}

TEST(RequestRunner, ChatWithTokenPromptsIsAUsageError) {
  RunOptions options;
  options.api = ApiKind::chat;
  RequestRunner runner(options, make_curl_transport());
  auto r = runner.run(closed_requests(1, 1, 1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::usage);
}

TEST_P(RequestRunnerTest, ConnectionRefusedIsRecorded) {
  uint16_t port = 0;
  {
    StreamServer probe({});
    port = probe.port();
  }  // closed again: nothing listens there now
  const Collected c =
      run_against("http://127.0.0.1:" + std::to_string(port), closed_requests(3, 2, 4));
  ASSERT_EQ(c.records.size(), 3u);
  for (const auto& r : c.records) {
    EXPECT_EQ(r.status, RequestStatus::error);
    EXPECT_EQ(r.failure, FailureKind::connect);
    EXPECT_EQ(r.http_status, 0);
    EXPECT_FALSE(r.error_text.empty());
    expect_well_ordered(r);
  }
  EXPECT_EQ(c.result.conditions[0].errors_by_kind.at("connect"), 3u);
}

TEST_P(RequestRunnerTest, EveryFaultEndsInTheTraceWithItsKind) {
  const std::vector<std::pair<Fault, FailureKind>> cases = {
      {Fault::none, FailureKind::none},
      {Fault::http_500, FailureKind::http_5xx},
      {Fault::http_429, FailureKind::http_429},
      {Fault::http_400, FailureKind::http_4xx},
      {Fault::reset_mid_stream, FailureKind::reset},
      {Fault::close_mid_stream, FailureKind::reset},
      {Fault::malformed_sse, FailureKind::malformed_sse},
      {Fault::error_payload, FailureKind::server_error},
      {Fault::no_done, FailureKind::malformed_sse},
  };
  StreamServerOptions so;
  so.fault = [&](uint64_t i) { return cases[i % cases.size()].first; };
  StreamServer server(so);
  // Concurrency 1 keeps the server's request order equal to the workload's.
  const Collected c = run_against(server.url(), closed_requests(cases.size() * 2, 1, 8));
  ASSERT_EQ(c.records.size(), cases.size() * 2);
  for (const auto& r : c.records) {
    const auto [fault, kind] = cases[r.request_id % cases.size()];
    EXPECT_EQ(r.failure, kind) << "request " << r.request_id << ": " << r.error_text;
    EXPECT_EQ(r.status, kind == FailureKind::none ? RequestStatus::ok : RequestStatus::error);
    if (kind != FailureKind::none) {
      EXPECT_FALSE(r.error_text.empty()) << r.request_id;
    }
    expect_well_ordered(r);
  }
  // Tokens before a mid-stream fault were still timed.
  EXPECT_EQ(c.records[4].tokens_streamed, 2u);
  EXPECT_NE(c.records[1].error_text.find("engine crashed"), std::string::npos);
}

TEST_P(RequestRunnerTest, StallPastTheTimeoutIsATimeout) {
  StreamServerOptions so;
  so.fault = [](uint64_t) { return Fault::stall; };
  so.stall_ms = 3000;
  StreamServer server(so);
  RunOptions options;
  options.request_timeout_s = 0.3;
  const Collected c = run_against(server.url(), closed_requests(2, 2, 8), options);
  ASSERT_EQ(c.records.size(), 2u);
  for (const auto& r : c.records) {
    EXPECT_EQ(r.failure, FailureKind::timeout) << r.error_text;
    EXPECT_NE(r.first_token_ns, k_no_time);  // one token came before the stall
    EXPECT_GE(r.e2e_ms(), 290.0);
    EXPECT_LT(r.e2e_ms(), 2500.0);
  }
}

TEST_P(RequestRunnerTest, AServerThatStreamsPastMaxTokensIsCutOffThere) {
  // Asked for 8 tokens, the server would send 4 million: each request ends at the ninth, as a
  // server fault, instead of filling memory until the request timeout.
  StreamServerOptions so;
  so.tokens = 4'000'000;
  so.events_per_write = 64;
  StreamServer server(so);
  const Collected c = run_against(server.url(), closed_requests(4, 4, 8));
  ASSERT_EQ(c.records.size(), 4u);
  for (const auto& r : c.records) {
    EXPECT_EQ(r.status, RequestStatus::error);
    EXPECT_EQ(r.failure, FailureKind::malformed_sse) << r.error_text;
    EXPECT_NE(r.error_text.find("more tokens than max_tokens (8)"), std::string::npos)
        << r.error_text;
    EXPECT_EQ(r.tokens_streamed, 9u);
    EXPECT_LE(r.chunks.size(), 9u);
    EXPECT_LT(r.e2e_ms(), 5000.0);
  }
}

TEST_P(RequestRunnerTest, OpenLoopMeasuresFromTheIntendedSendTime) {
  // Every response takes ~100 ms; requests are due every 10 ms but only one may be in flight,
  // so later requests go out late. Their latency must count from when they were due.
  StreamServerOptions so;
  so.first_token_delay_us = 100'000;
  so.tokens = 2;
  StreamServer server(so);
  auto requests = closed_requests(4, 1, 2);
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].arrival = workload::Arrival::poisson;
    requests[i].send_offset_s = 0.010 * static_cast<double>(i);
  }
  const Collected c = run_against(server.url(), requests);
  ASSERT_EQ(c.records.size(), 4u);
  for (const auto& r : c.records) {
    ASSERT_EQ(r.status, RequestStatus::ok) << r.error_text;
    const double offset_ms = 10.0 * static_cast<double>(r.request_id);
    EXPECT_NEAR(static_cast<double>(r.intended_send_ns - c.records[0].intended_send_ns) / 1e6,
                offset_ms, 0.5);
    // Request k waits for the k before it: sent about k x 100 ms after its start, 10 k ms late.
    const double expected_delay_ms = 100.0 * r.request_id - offset_ms;
    EXPECT_GE(static_cast<double>(r.actual_send_ns - r.intended_send_ns) / 1e6,
              expected_delay_ms - 5.0);
    EXPECT_GE(r.ttft_ms(), 100.0 + expected_delay_ms - 5.0);
    expect_well_ordered(r);
  }
  EXPECT_GT(c.result.conditions[0].ttft_ms.max, 350.0);
}

TEST_P(RequestRunnerTest, StopFlagCancelsOpenStreams) {
  StreamServerOptions so;
  so.token_delay_us = 50'000;
  StreamServer server(so);
  RunOptions options;
  options.endpoint = server.url();
  RequestRunner runner(options, transport(server.url()));
  std::atomic<bool> stop{false};
  std::vector<RequestRecord> records;
  runner.set_on_record([&](const RequestRecord& r) -> Expected<void> {
    records.push_back(r);
    return {};
  });
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop = true;
  });
  auto result = runner.run(closed_requests(10, 3, 100), [&] { return stop.load(); });
  stopper.join();
  ASSERT_TRUE(result);
  EXPECT_TRUE(result->stopped);
  ASSERT_EQ(records.size(), 3u);  // only the three in flight were ever sent
  for (const auto& r : records) {
    EXPECT_EQ(r.status, RequestStatus::cancelled);
    EXPECT_EQ(r.failure, FailureKind::cancelled);
    EXPECT_GT(r.tokens_streamed, 0u);
  }
  EXPECT_EQ(result->conditions.at(0).n_cancelled, 3u);
}

TEST_P(RequestRunnerTest, ConditionsRunInOrderWithProgress) {
  StreamServer server({});
  auto requests = closed_requests(4, 2, 3, "first");
  auto second = closed_requests(6, 3, 3, "second");
  for (auto& r : second) {
    r.request_id += 100;
    requests.push_back(r);
  }
  RunOptions options;
  options.endpoint = server.url();
  RequestRunner runner(options, transport(server.url()));
  std::vector<Progress> seen;
  runner.set_progress([&](const Progress& p) { seen.push_back(p); });
  const auto result = runner.run(requests).value();
  ASSERT_EQ(result.conditions.size(), 2u);
  EXPECT_EQ(result.conditions[0].condition_id, "first");
  EXPECT_EQ(result.conditions[1].n_ok, 6u);
  EXPECT_EQ(result.conditions[1].concurrency, 3u);
  ASSERT_EQ(seen.size(), 4u + 6u + 2u + 2u);  // a start and an end per condition
  EXPECT_TRUE(seen.back().condition_done);
  EXPECT_FALSE(seen[seen.size() - 2].condition_done);
  EXPECT_EQ(seen.back().condition_id, "second");
  EXPECT_EQ(seen.back().done, 6u);
  EXPECT_EQ(seen.back().total, 6u);
  EXPECT_EQ(seen.back().n_conditions, 2u);
}

TEST_P(RequestRunnerTest, MinConditionSecondsRepeatsRequestsUntilReached) {
  StreamServerOptions so;
  so.token_delay_us = 5000;  // 3 tokens: a request lasts ~15 ms, a pass of 4 at c2 ~30 ms
  StreamServer server(so);
  RunOptions options;
  options.min_condition_s = 0.2;
  auto requests = closed_requests(4, 2, 3, "short");
  auto second = closed_requests(2, 2, 3, "long_enough");
  for (auto& r : second) {
    r.request_id += 100;
    requests.push_back(r);
  }
  const auto c = run_against(server.url(), requests, options);
  ASSERT_EQ(c.result.conditions.size(), 2u);
  for (const auto& stats : c.result.conditions) {
    // Each condition lasted the minimum, every repeat is a counted request of it.
    EXPECT_GE(stats.duration_s, 0.2) << stats.condition_id;
    EXPECT_LT(stats.duration_s, 0.5) << stats.condition_id;
    EXPECT_GT(stats.n_repeated, 0u) << stats.condition_id;
    EXPECT_EQ(stats.n_ok, stats.n_requests);
  }
  uint64_t repeats = 0;
  std::map<std::pair<uint64_t, uint32_t>, int> seen;
  for (const auto& r : c.records) {
    expect_well_ordered(r);
    if (r.repeat > 0) ++repeats;
    const std::pair<uint64_t, uint32_t> key{r.request_id, r.repeat};
    EXPECT_EQ(++seen[key], 1) << "request and repeat pair sent twice";
  }
  EXPECT_EQ(repeats, c.result.conditions[0].n_repeated + c.result.conditions[1].n_repeated);
  EXPECT_EQ(c.records.size(), 6u + repeats);
  // Without the option each request is sent once.
  const auto once = run_against(server.url(), requests);
  EXPECT_EQ(once.records.size(), 6u);
  EXPECT_EQ(once.result.conditions[0].n_repeated, 0u);
}

TEST_P(RequestRunnerTest, RecordCallbackErrorStopsTheRun) {
  StreamServer server({});
  RunOptions options;
  options.endpoint = server.url();
  RequestRunner runner(options, transport(server.url()));
  runner.set_on_record(
      [](const RequestRecord&) -> Expected<void> { return fail(ErrorKind::io, "disk full"); });
  auto r = runner.run(closed_requests(20, 1, 2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "disk full");
  EXPECT_LT(server.requests_seen(), 20u);
}

TEST(RequestRunner, MakesItsOwnTransportWhenGivenNone) {
  StreamServer server({});
  RunOptions options;
  options.endpoint = server.url();
  for (const TransportKind kind :
       {TransportKind::automatic, TransportKind::raw, TransportKind::curl}) {
    options.transport = kind;
    RequestRunner runner(options);
    const auto result = runner.run(closed_requests(3, 2, 4)).value();
    EXPECT_EQ(result.conditions.at(0).n_ok, 3u) << transport_kind_name(kind);
  }
}

TEST(RequestRunner, RawTransportRefusesHttps) {
  RunOptions options;
  options.endpoint = "https://api.example.com/v1";
  options.transport = TransportKind::raw;
  RequestRunner runner(options);
  auto r = runner.run(closed_requests(1, 1, 1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::usage);
}

INSTANTIATE_TEST_SUITE_P(Transports, RequestRunnerTest,
                         ::testing::Values(TransportKind::raw, TransportKind::curl),
                         [](const ::testing::TestParamInfo<TransportKind>& param_info) {
                           return std::string(transport_kind_name(param_info.param));
                         });

}  // namespace
}  // namespace kvprof::client
