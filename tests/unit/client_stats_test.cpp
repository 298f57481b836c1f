// Tests for src/kvprof/client/stats.cpp: percentiles and per-condition accumulation.
#include "kvprof/client/stats.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace kvprof::client {
namespace {

TEST(Stats, PercentilesInterpolateLikeNumpy) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i)
    v.push_back(i);
  const Percentiles p = percentiles(v);
  EXPECT_EQ(p.n, 100u);
  EXPECT_DOUBLE_EQ(p.p50, 50.5);
  EXPECT_DOUBLE_EQ(p.p90, 90.1);
  EXPECT_DOUBLE_EQ(p.p99, 99.01);
  EXPECT_DOUBLE_EQ(p.mean, 50.5);
  EXPECT_DOUBLE_EQ(p.max, 100);
  std::vector<double> empty;
  EXPECT_EQ(percentiles(empty).n, 0u);
}

TEST(Stats, PercentilesMatchASortedReferenceWithTiesAndSmallSizes) {
  std::mt19937 rng(7);
  for (const size_t n : {1u, 2u, 3u, 10u, 101u, 1000u, 4096u}) {
    std::vector<double> v(n);
    for (double& x : v)
      x = static_cast<double>(rng() % 50);  // many ties
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const auto reference = [&](double q) {
      const double rank = q * static_cast<double>(n - 1);
      const auto lo = static_cast<size_t>(std::floor(rank));
      const size_t hi = std::min(lo + 1, n - 1);
      return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
    };
    const Percentiles p = percentiles(v);
    EXPECT_DOUBLE_EQ(p.p50, reference(0.50)) << n;
    EXPECT_DOUBLE_EQ(p.p90, reference(0.90)) << n;
    EXPECT_DOUBLE_EQ(p.p99, reference(0.99)) << n;
    EXPECT_DOUBLE_EQ(p.max, sorted.back()) << n;
  }
}

RequestRecord ok_record(int64_t intended_ms, int64_t first_ms, int64_t end_ms, uint32_t n) {
  RequestRecord r;
  r.intended_send_ns = intended_ms * 1'000'000;
  r.first_token_ns = first_ms * 1'000'000;
  r.end_ns = end_ms * 1'000'000;
  for (uint32_t i = 0; i < n; ++i)
    r.chunks.push_back({(first_ms + 10 * i) * 1'000'000, 1});
  r.tokens_streamed = n;
  return r;
}

TEST(Stats, AccumulatorComputesThroughputLatenciesAndErrors) {
  ConditionAccumulator acc("c", 2);
  acc.add(ok_record(0, 100, 200, 4));
  acc.add(ok_record(0, 300, 1000, 4));
  RequestRecord err;
  err.status = RequestStatus::error;
  err.failure = FailureKind::http_429;
  err.end_ns = 5'000'000;
  acc.add(err);
  RequestRecord cancelled;
  cancelled.status = RequestStatus::cancelled;
  cancelled.failure = FailureKind::cancelled;
  acc.add(cancelled);
  const ConditionStats s = acc.finish();
  EXPECT_EQ(s.n_requests, 4u);
  EXPECT_EQ(s.n_ok, 2u);
  EXPECT_EQ(s.n_errors, 1u);
  EXPECT_EQ(s.n_cancelled, 1u);
  EXPECT_EQ(s.errors_by_kind.at("http_429"), 1u);
  EXPECT_DOUBLE_EQ(s.duration_s, 1.0);
  EXPECT_DOUBLE_EQ(s.request_throughput_per_s, 2.0);
  EXPECT_DOUBLE_EQ(s.output_tokens_per_s, 8.0);
  EXPECT_DOUBLE_EQ(s.ttft_ms.p50, 200.0);
  EXPECT_EQ(s.itl_ms.n, 6u);
  EXPECT_DOUBLE_EQ(s.itl_ms.p50, 10.0);
  EXPECT_DOUBLE_EQ(s.e2e_ms.max, 1000.0);
  EXPECT_EQ(to_json(s)["errors_by_kind"]["http_429"], 1);
}

}  // namespace
}  // namespace kvprof::client
