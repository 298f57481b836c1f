// Tests for src/kvprof/workload/repeat.cpp: a repeat keeps the shared prefix and the prompt's
// tokens, and differs from the request and from other repeats after the prefix.
#include "kvprof/workload/repeat.hpp"

#include <gtest/gtest.h>

#include <algorithm>

namespace kvprof::workload {
namespace {

RequestSpec first_of(PromptFormat format, PrefixMode mode) {
  GridOptions o;
  o.input_lens = {64};
  o.output_lens = {4};
  o.concurrencies = {1};
  o.prefix_modes = {mode};
  o.prompt_format = format;
  return generate(o).value().front();
}

TEST(WorkloadRepeat, TokenRepeatsKeepThePrefixAndDifferAfterIt) {
  const RequestSpec r = first_of(PromptFormat::tokens, PrefixMode::high);
  ASSERT_GT(r.prefix_len, 0u);
  EXPECT_EQ(repeat_of(r, 0).prompt_token_ids, r.prompt_token_ids);
  const RequestSpec a = repeat_of(r, 1);
  const RequestSpec b = repeat_of(r, 2);
  ASSERT_EQ(a.prompt_token_ids.size(), r.prompt_token_ids.size());
  EXPECT_TRUE(std::equal(r.prompt_token_ids.begin(), r.prompt_token_ids.begin() + r.prefix_len,
                         a.prompt_token_ids.begin()));
  EXPECT_NE(a.prompt_token_ids, r.prompt_token_ids);
  EXPECT_NE(a.prompt_token_ids, b.prompt_token_ids);
  auto sorted_r = r.prompt_token_ids, sorted_a = a.prompt_token_ids;
  std::sort(sorted_r.begin(), sorted_r.end());
  std::sort(sorted_a.begin(), sorted_a.end());
  EXPECT_EQ(sorted_r, sorted_a);  // the same tokens: in range, same length
  EXPECT_EQ(a.request_id, r.request_id);
  EXPECT_EQ(a.condition_id, r.condition_id);
}

TEST(WorkloadRepeat, TextRepeatsKeepTheWordCount) {
  const RequestSpec r = first_of(PromptFormat::text, PrefixMode::low);
  const RequestSpec a = repeat_of(r, 3);
  EXPECT_NE(a.prompt_text, r.prompt_text);
  EXPECT_EQ(std::count(a.prompt_text.begin(), a.prompt_text.end(), ' '),
            std::count(r.prompt_text.begin(), r.prompt_text.end(), ' '));
  EXPECT_EQ(a.prompt_text.size(), r.prompt_text.size());
}

}  // namespace
}  // namespace kvprof::workload
