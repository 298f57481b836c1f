// profile/derived.cpp on hand-built scrapes and condition facts: KV tokens from usage x capacity,
// the scrape of the KV peak, KV tokens per request measured vs expected, and the largest
// concurrency per input length that ran without queueing or preemption.
#include "kvprof/profile/derived.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <string>
#include <vector>

namespace kvprof::profile {
namespace {

metrics::MetricsSnapshot snap(std::optional<double> usage, std::optional<uint64_t> capacity,
                              std::optional<double> running = std::nullopt,
                              std::optional<double> used_tokens = std::nullopt) {
  metrics::MetricsSnapshot s;
  s.kv_cache_usage = usage;
  s.kv_cache_capacity_tokens = capacity;
  s.num_requests_running = running;
  s.kv_cache_used_tokens = used_tokens;
  return s;
}

ConditionFacts facts(uint32_t in, uint32_t out, uint32_t concurrency, std::optional<double> waiting,
                     std::optional<double> preemptions) {
  ConditionFacts f;
  f.condition_id = "in" + std::to_string(in) + "_out" + std::to_string(out) + "_c" +
                   std::to_string(concurrency) + "_low";
  f.input_tokens = in;
  f.output_tokens = out;
  f.concurrency = concurrency;
  f.n_scrapes = 3;
  // A server holding requests back runs fewer than were sent.
  const double held = waiting ? std::min<double>(*waiting, concurrency) : 0.0;
  f.peak_running = concurrency - held;
  f.peak_waiting = waiting;
  f.preemptions = preemptions;
  f.block_size_tokens = 16;
  return f;
}

TEST(ProfileDerived, KvTokensAreTheServersCountElseUsageTimesCapacity) {
  KvTokensSource source = KvTokensSource::none;
  // Only usage and capacity (vLLM): the product.
  EXPECT_EQ(kv_tokens_used(snap(0.25, 9600), std::nullopt, source), 2400.0);
  EXPECT_EQ(source, KvTokensSource::usage_times_capacity);
  EXPECT_EQ(kv_tokens_source_name(source), "usage x capacity");
  // The server's own count wins over the product.
  EXPECT_EQ(kv_tokens_used(snap(0.25, 9600, 1, 2000), std::nullopt, source), 2000.0);
  EXPECT_EQ(source, KvTokensSource::reported);
  // A capacity seen earlier serves a scrape without one.
  EXPECT_EQ(kv_tokens_used(snap(0.5, std::nullopt), 1000, source), 500.0);
  // Usage without any capacity, or nothing at all: unknown.
  EXPECT_FALSE(kv_tokens_used(snap(0.5, std::nullopt), std::nullopt, source));
  EXPECT_EQ(source, KvTokensSource::none);
  EXPECT_FALSE(kv_tokens_used(snap(std::nullopt, 9600), std::nullopt, source));
}

TEST(ProfileDerived, KvPeakIsTheScrapeWithTheMostTokensAndItsRunningCount) {
  std::vector<MetricsPoint> points{
      {5, snap(0.9, 1600, 9)},                 // before the window: only its capacity counts
      {10, snap(0.10, std::nullopt, 2)},       // 160 tokens, capacity carried over
      {20, snap(0.30, 1600, 4)},               // 480 tokens: the peak
      {30, snap(0.20, 1600, 6)},               // more running, fewer tokens
      {40, snap(std::nullopt, std::nullopt)},  // a scrape without KV figures
      {50, snap(1.0, 1600, 10)}};              // after the window
  const KvPeak peak = kv_peak_in(points, {10, 50});
  ASSERT_TRUE(peak.used_tokens);
  EXPECT_EQ(*peak.used_tokens, 480.0);
  EXPECT_EQ(peak.running, 4.0);
  EXPECT_EQ(peak.source, KvTokensSource::usage_times_capacity);
  EXPECT_FALSE(kv_peak_in(points, {41, 49}).used_tokens);
  EXPECT_EQ(kv_peak_in(points, {10, 11}).used_tokens, 160.0);
}

TEST(ProfileDerived, KvTokensPerRequestMeasuredAgainstPromptPlusOutputInBlocks) {
  ConditionFacts f = facts(64, 8, 4, 0, 0);
  f.kv_peak = {320.0, KvTokensSource::usage_times_capacity, 4.0};
  ConditionFacts no_running = facts(100, 8, 2, 0, 0);
  no_running.kv_peak = {224.0, KvTokensSource::reported, 0.0};
  ConditionFacts no_block = facts(100, 5, 1, 0, 0);
  no_block.block_size_tokens.reset();
  const auto d = derive_answers({f, no_running, no_block});
  ASSERT_EQ(d.conditions.size(), 3U);
  EXPECT_EQ(d.conditions[0].expected_kv_tokens_per_request, 80U);  // 72 -> 5 blocks of 16
  EXPECT_EQ(d.conditions[0].measured_kv_tokens_per_request, 80.0);
  EXPECT_EQ(d.conditions[1].expected_kv_tokens_per_request, 112U);  // 108 -> 7 blocks
  EXPECT_FALSE(d.conditions[1].measured_kv_tokens_per_request);     // nothing running there
  EXPECT_EQ(d.conditions[2].expected_kv_tokens_per_request, 105U);  // no block size: exact
  EXPECT_FALSE(d.conditions[2].measured_kv_tokens_per_request);
}

TEST(ProfileDerived, LargestConcurrencyWithoutQueueingPerInputLength) {
  const auto d = derive_answers({
      facts(64, 8, 1, 0, 0), facts(64, 8, 2, 0, 0), facts(64, 8, 4, 0, 0),
      facts(64, 8, 8, 4, 0),                           // queued: 4 waiting
      facts(512, 8, 1, 0, 0), facts(512, 8, 2, 0, 2),  // preempted, nothing waiting at scrapes
      facts(512, 8, 4, 2, 3),
      facts(64, 32, 4, 1, 0),  // another output length at 64 queued at 4 already
  });
  ASSERT_EQ(d.max_concurrency_without_queueing.size(), 2U);
  const auto& a64 = d.max_concurrency_without_queueing[0];
  EXPECT_EQ(a64.input_tokens, 64U);
  EXPECT_EQ(a64.max_concurrency, 2U);  // every condition at a concurrency must be clean
  EXPECT_EQ(a64.first_queued_concurrency, 4U);
  EXPECT_EQ(a64.conditions.size(), 5U);
  const auto& a512 = d.max_concurrency_without_queueing[1];
  EXPECT_EQ(a512.input_tokens, 512U);
  EXPECT_EQ(a512.max_concurrency, 1U);
  EXPECT_EQ(a512.first_queued_concurrency, 2U);
  EXPECT_EQ(d.conditions[5].ran_without_queueing, false);
  EXPECT_EQ(d.conditions[0].ran_without_queueing, true);
}

TEST(ProfileDerived, WaitingOnlyForTheStepsTokenBudgetIsNotQueueing) {
  // 8 prompts of 2048 tokens over a budget of 8192 per step: 4 wait one step, then all 8 run.
  ConditionFacts burst = facts(2048, 32, 8, 4, 0);
  burst.peak_running = 8;
  ConditionFacts capped = facts(2048, 32, 16, 4, 0);  // 12 ran at most: capacity held 4 back
  const auto d = derive_answers({burst, capped});
  EXPECT_EQ(d.conditions[0].ran_without_queueing, true);
  EXPECT_EQ(d.conditions[1].ran_without_queueing, false);
  EXPECT_EQ(d.max_concurrency_without_queueing[0].max_concurrency, 8U);
  EXPECT_EQ(d.max_concurrency_without_queueing[0].first_queued_concurrency, 16U);
}

TEST(ProfileDerived, NoLimitReachedAndUnknownGaugesAreSaidSo) {
  auto all_clean = derive_answers({facts(64, 8, 1, 0, 0), facts(64, 8, 2, 0, std::nullopt)});
  ASSERT_EQ(all_clean.max_concurrency_without_queueing.size(), 1U);
  EXPECT_EQ(all_clean.max_concurrency_without_queueing[0].max_concurrency, 2U);
  EXPECT_FALSE(all_clean.max_concurrency_without_queueing[0].first_queued_concurrency);
  EXPECT_NE(derived_text(all_clean).find("at input 64: 2 (or more)"), std::string::npos);

  // No waiting gauge (a server that does not export one): cannot tell.
  auto unknown = derive_answers({facts(64, 8, 1, std::nullopt, 0)});
  EXPECT_FALSE(unknown.conditions[0].ran_without_queueing);
  EXPECT_FALSE(unknown.max_concurrency_without_queueing[0].max_concurrency);
  EXPECT_NE(unknown.max_concurrency_without_queueing[0].note.find("cannot tell"),
            std::string::npos);

  // A condition with no scrape cannot be judged either; the answer stops below it.
  ConditionFacts unseen = facts(64, 8, 4, 0, 0);
  unseen.n_scrapes = 0;
  auto stops = derive_answers({facts(64, 8, 2, 0, 0), unseen, facts(64, 8, 8, 0, 0)});
  EXPECT_EQ(stops.max_concurrency_without_queueing[0].max_concurrency, 2U);
  EXPECT_FALSE(stops.max_concurrency_without_queueing[0].first_queued_concurrency);

  // The smallest concurrency already queued: none.
  auto none = derive_answers({facts(64, 8, 1, 1, 0)});
  EXPECT_FALSE(none.max_concurrency_without_queueing[0].max_concurrency);
  EXPECT_NE(derived_text(none).find("at input 64: none"), std::string::npos);
}

TEST(ProfileDerived, JsonCarriesTheEvidence) {
  ConditionFacts f = facts(64, 8, 4, 2, 0);
  f.kv_peak = {320.0, KvTokensSource::usage_times_capacity, 4.0};
  const auto j = derived_json(derive_answers({facts(64, 8, 2, 0, 0), f}));
  const auto& limit = j.at("max_concurrency_without_queueing").at(0);
  EXPECT_EQ(limit.at("input_len_tokens"), 64);
  EXPECT_EQ(limit.at("max_concurrency"), 2);
  EXPECT_EQ(limit.at("first_queued_concurrency"), 4);
  ASSERT_EQ(limit.at("evidence").size(), 2U);
  EXPECT_EQ(limit.at("evidence")[1].at("peak_num_requests_waiting"), 2.0);
  EXPECT_EQ(limit.at("evidence")[1].at("ran_without_queueing"), false);
  const auto& per = j.at("kv_tokens_per_request").at(1);
  EXPECT_EQ(per.at("expected_tokens"), 80);
  EXPECT_EQ(per.at("measured_tokens"), 80.0);
  EXPECT_EQ(per.at("measured_over_expected"), 1.0);

  nlohmann::json condition = nlohmann::json::object();
  add_condition_fields(condition, derive_answers({f}).conditions[0]);
  EXPECT_EQ(condition.at("peak_kv_cache_used_tokens"), 320.0);
  EXPECT_EQ(condition.at("peak_kv_cache_used_tokens_source"), "usage x capacity");
  EXPECT_EQ(condition.at("peak_num_requests_waiting"), 2.0);
  EXPECT_EQ(condition.at("ran_without_queueing"), false);
}

}  // namespace
}  // namespace kvprof::profile
