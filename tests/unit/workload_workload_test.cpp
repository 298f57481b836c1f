// Tests for src/kvprof/workload/workload.cpp: the grid, determinism, exact lengths, prefixes.
#include "kvprof/workload/workload.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace kvprof::workload {
namespace {

GridOptions small_grid() {
  GridOptions o;
  o.input_lens = {64, 200};
  o.output_lens = {8, 16};
  o.concurrencies = {2, 4};
  o.seed = 42;
  return o;
}

TEST(Workload, DefaultGridMatchesSeed002Axes) {
  const GridOptions o;
  const GridSize size = grid_size(o);
  EXPECT_EQ(size.n_conditions, 48u);  // 3 x 2 x 4 x 2
  // n_per_condition x concurrency requests per condition: (8+16+32+64) x 3 x 2 x 2.
  EXPECT_EQ(size.n_requests, 120u * 12u);
  GridOptions exact = o;
  exact.count_mode = CountMode::exact;
  EXPECT_EQ(grid_size(exact).n_requests, 48u);
}

TEST(Workload, ConditionsInOrderWithIdsAndCounts) {
  const auto requests = generate(small_grid()).value();
  const auto conds = conditions_of(requests);
  ASSERT_EQ(conds.size(), 16u);
  EXPECT_EQ(conds[0].id, "in64_out8_c2_low");
  EXPECT_EQ(conds[1].id, "in64_out8_c2_high");
  EXPECT_EQ(conds[2].id, "in64_out8_c4_low");
  EXPECT_EQ(conds.back().id, "in200_out16_c4_high");
  EXPECT_EQ(conds[0].count, 2u);
  EXPECT_EQ(conds[2].count, 4u);
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(requests[i].request_id, i);
}

TEST(Workload, ExactTokenCountsRangeAndMaxTokens) {
  const GridOptions o = small_grid();
  const auto requests = generate(o).value();
  for (const auto& r : requests) {
    ASSERT_EQ(r.prompt_token_ids.size(), r.input_len);
    EXPECT_EQ(r.max_tokens, r.output_len);
    EXPECT_TRUE(r.ignore_eos);
    EXPECT_EQ(r.arrival, Arrival::closed);
    for (const uint32_t t : r.prompt_token_ids) {
      ASSERT_GE(t, o.token_id_min);
      ASSERT_LT(t, o.token_id_max);
    }
  }
}

TEST(Workload, HighModeSharesAPrefixLowModeDoesNot) {
  GridOptions o = small_grid();
  o.n_per_condition = 3;
  const auto requests = generate(o).value();
  for (const auto& c : conditions_of(requests)) {
    const auto& first = requests[c.first];
    for (size_t i = c.first + 1; i < c.first + c.count; ++i) {
      const auto& r = requests[i];
      const auto mismatch = std::mismatch(first.prompt_token_ids.begin(),
                                          first.prompt_token_ids.end(), r.prompt_token_ids.begin());
      const auto common = static_cast<size_t>(mismatch.first - first.prompt_token_ids.begin());
      if (r.prefix_mode == PrefixMode::high) {
        EXPECT_EQ(r.prefix_len, static_cast<uint32_t>(r.input_len * 0.9));
        EXPECT_GE(common, r.prefix_len) << c.id;
        EXPECT_LT(common, r.input_len) << c.id;  // the rest differs
      } else {
        EXPECT_EQ(r.prefix_len, 0u);
        EXPECT_LT(common, 3u) << c.id;
      }
    }
  }
}

TEST(Workload, DifferentConditionsHaveDifferentPrefixes) {
  const auto requests = generate(small_grid()).value();
  std::set<std::vector<uint32_t>> prefixes;
  size_t n_high = 0;
  for (const auto& c : conditions_of(requests)) {
    const auto& r = requests[c.first];
    if (r.prefix_mode != PrefixMode::high) continue;
    ++n_high;
    prefixes.insert({r.prompt_token_ids.begin(), r.prompt_token_ids.begin() + 32});
  }
  EXPECT_EQ(prefixes.size(), n_high);
}

TEST(Workload, SameSeedSameWorkloadOtherSeedDiffers) {
  const auto a = generate(small_grid()).value();
  const auto b = generate(small_grid()).value();
  GridOptions other = small_grid();
  other.seed = 43;
  const auto c = generate(other).value();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].prompt_token_ids, b[i].prompt_token_ids);
  EXPECT_NE(a[0].prompt_token_ids, c[0].prompt_token_ids);
}

TEST(Workload, PoissonOffsetsAreIncreasingWithTheRequestedMeanRate) {
  GridOptions o;
  o.input_lens = {16};
  o.output_lens = {4};
  o.concurrencies = {1};
  o.prefix_modes = {PrefixMode::low};
  o.n_per_condition = 4000;
  o.count_mode = CountMode::exact;
  o.request_rate = 20.0;
  const auto requests = generate(o).value();
  EXPECT_EQ(requests.front().send_offset_s, 0.0);
  for (size_t i = 1; i < requests.size(); ++i) {
    ASSERT_EQ(requests[i].arrival, Arrival::poisson);
    ASSERT_GT(requests[i].send_offset_s, requests[i - 1].send_offset_s);
  }
  const double mean_gap = requests.back().send_offset_s / (requests.size() - 1);
  EXPECT_NEAR(mean_gap, 1.0 / 20.0, 0.005);
}

TEST(Workload, TextPromptsHaveInputLenWordsAndSharedPrefix) {
  GridOptions o = small_grid();
  o.prompt_format = PromptFormat::text;
  o.prefix_modes = {PrefixMode::high};
  const auto requests = generate(o).value();
  for (const auto& r : requests) {
    EXPECT_TRUE(r.prompt_token_ids.empty());
    EXPECT_EQ(static_cast<size_t>(std::count(r.prompt_text.begin(), r.prompt_text.end(), ' ')),
              r.input_len - 1);
  }
  const auto& a = requests[0].prompt_text;
  const auto& b = requests[1].prompt_text;
  ASSERT_EQ(requests[0].condition_id, requests[1].condition_id);
  EXPECT_EQ(a.substr(0, a.size() / 2), b.substr(0, a.size() / 2));
  EXPECT_NE(a, b);
}

TEST(Workload, ValidationRejectsBadSettings) {
  GridOptions o = small_grid();
  o.input_lens = {};
  EXPECT_EQ(generate(o).error().kind, ErrorKind::usage);
  o = small_grid();
  o.concurrencies = {0};
  EXPECT_FALSE(generate(o));
  o = small_grid();
  o.input_lens = {k_max_input_len + 1};
  EXPECT_FALSE(generate(o));
  o = small_grid();
  o.prefix_fraction = 1.0;
  EXPECT_FALSE(generate(o));
  o = small_grid();
  o.token_id_min = o.token_id_max;
  EXPECT_FALSE(generate(o));
  o = GridOptions{};
  o.input_lens = {1u << 20};
  o.n_per_condition = 100;
  EXPECT_NE(generate(o).error().message.find("prompt tokens"), std::string::npos);
}

TEST(Workload, ParseEnumNames) {
  EXPECT_EQ(parse_prefix_mode("high").value(), PrefixMode::high);
  EXPECT_FALSE(parse_prefix_mode("medium"));
  EXPECT_EQ(parse_prompt_format("text").value(), PromptFormat::text);
  EXPECT_EQ(parse_count_mode("exact").value(), CountMode::exact);
  EXPECT_EQ(parse_arrival("poisson").value(), Arrival::poisson);
}

}  // namespace
}  // namespace kvprof::workload
