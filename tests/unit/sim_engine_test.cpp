// Tests for src/kvprof/sim/engine.cpp: exact block accounting, preemption when blocks run out,
// prefix caching, chunked prefill, max_num_seqs and the max_model_len check.
#include "kvprof/sim/engine.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace kvprof::sim {
namespace {

SimConfig small_config(uint32_t blocks, bool caching) {
  SimConfig c;
  c.num_gpu_blocks = blocks;
  c.block_size = 16;
  c.max_num_seqs = 64;
  c.max_num_batched_tokens = 100000;
  c.max_model_len = 4096;
  c.enable_prefix_caching = caching;
  return c;
}

std::vector<uint32_t> random_prompt(std::mt19937& rng, uint32_t len) {
  std::vector<uint32_t> p(len);
  for (auto& t : p)
    t = 256 + rng() % 30000;
  return p;
}

uint32_t ceil16(uint32_t n) {
  return (n + 15) / 16;
}

// Runs the engine to completion; returns the tokens each request produced.
std::map<uint64_t, std::vector<uint32_t>> run_all(Engine& e, int max_steps = 100000) {
  std::map<uint64_t, std::vector<uint32_t>> tokens;
  for (int i = 0; i < max_steps && e.has_unfinished(); ++i) {
    for (const auto& out : e.step(i * 0.01)) {
      for (uint32_t t : out.new_token_ids)
        tokens[out.request_id].push_back(t);
    }
  }
  return tokens;
}

TEST(SimEngine, UsedBlocksEqualSumOfCeilComputedOverBlockSize) {
  Engine e(small_config(4000, false));
  std::mt19937 rng(7);
  std::map<uint64_t, uint32_t> max_tokens;
  for (uint64_t id = 1; id <= 12; ++id) {
    const uint32_t len = 1 + rng() % 300;
    max_tokens[id] = 1 + rng() % 60;
    e.add_request(id, random_prompt(rng, len), max_tokens[id], 0);
  }
  int steps = 0;
  while (e.has_unfinished()) {
    ASSERT_LT(++steps, 10000);
    e.step(steps * 0.001);
    uint64_t expected = 0;
    for (const auto& r : e.running_requests()) {
      EXPECT_EQ(r.num_blocks, ceil16(r.num_computed_tokens)) << "request " << r.request_id;
      expected += ceil16(r.num_computed_tokens);
    }
    ASSERT_EQ(e.block_pool().num_used(), expected) << "step " << steps;
  }
  EXPECT_EQ(e.block_pool().num_used(), 0u);
  uint64_t total = 0;
  for (const auto& [id, n] : max_tokens)
    total += n;
  EXPECT_EQ(e.stats().generation_tokens_total, total);
  EXPECT_EQ(e.stats().requests_finished_total, 12u);
}

TEST(SimEngine, PreemptsExactlyWhenRunningRequestsNeedMoreBlocksThanAreFree) {
  const SimConfig cfg = small_config(20, false);  // 320 tokens of KV
  Engine e(cfg);
  std::mt19937 rng(3);
  std::map<uint64_t, std::vector<uint32_t>> prompts;
  for (uint64_t id = 1; id <= 4; ++id) {
    prompts[id] = random_prompt(rng, 48);
    e.add_request(id, prompts[id], 60, 0);  // each ends at 108 tokens = 7 blocks; 4 x 7 > 20
  }
  std::map<uint64_t, std::vector<uint32_t>> tokens;
  int steps = 0;
  while (e.has_unfinished()) {
    ASSERT_LT(++steps, 10000);
    // The running requests' demand for new blocks this step (the budget never truncates here).
    uint64_t demand = 0;
    for (const auto& r : e.running_requests()) {
      const uint32_t want = ceil16(r.num_tokens);
      demand += want > r.num_blocks ? want - r.num_blocks : 0;
    }
    const uint32_t free_blocks = e.block_pool().num_free();
    const StepPlan plan = e.schedule();
    if (demand > free_blocks) {
      EXPECT_GT(plan.num_preempted, 0u) << "step " << steps;
    } else {
      EXPECT_EQ(plan.num_preempted, 0u) << "step " << steps;
    }
    for (const auto& out : e.complete_step(steps * 0.001)) {
      for (uint32_t t : out.new_token_ids)
        tokens[out.request_id].push_back(t);
    }
  }
  EXPECT_GT(e.stats().num_preemptions_total, 0u);
  EXPECT_EQ(e.stats().requests_finished_total, 4u);
  EXPECT_EQ(e.block_pool().num_used(), 0u);

  // Recompute after preemption yields the same tokens as an unconstrained run.
  Engine roomy(small_config(1000, false));
  for (const auto& [id, p] : prompts)
    roomy.add_request(id, p, 60, 0);
  const auto reference = run_all(roomy);
  EXPECT_EQ(roomy.stats().num_preemptions_total, 0u);
  EXPECT_EQ(tokens, reference);
}

TEST(SimEngine, PrefixCacheSharesBlocksAndCountsHits) {
  Engine e(small_config(1000, true));
  std::mt19937 rng(11);
  const auto shared = random_prompt(rng, 64);  // 4 full blocks
  auto p1 = shared, p2 = shared;
  const auto s1 = random_prompt(rng, 20), s2 = random_prompt(rng, 20);
  p1.insert(p1.end(), s1.begin(), s1.end());
  p2.insert(p2.end(), s2.begin(), s2.end());

  e.add_request(1, p1, 50, 0);
  e.step(0.0);  // request 1 prefilled: its 5 full blocks are now cached
  e.add_request(2, p2, 50, 0);
  e.step(0.01);
  const auto s = e.stats();
  EXPECT_EQ(s.prefix_cache_queries_total, 84u + 84u);
  EXPECT_EQ(s.prefix_cache_hits_total, 64u);
  // The 4 shared blocks are held once: fewer blocks in use than the two requests hold.
  uint32_t held = 0;
  for (const auto& r : e.running_requests())
    held += r.num_blocks;
  EXPECT_EQ(e.block_pool().num_used(), held - 4);

  run_all(e);
  // An identical prompt later hits every full block but the one holding the last token.
  e.add_request(3, p1, 5, 0);
  e.step(1.0);
  EXPECT_EQ(e.stats().prefix_cache_hits_total, 64u + 80u);
  run_all(e);
}

TEST(SimEngine, PrefixCachingOffMeansNoHitsAndNoSharing) {
  Engine e(small_config(1000, false));
  std::mt19937 rng(5);
  const auto p = random_prompt(rng, 64);
  e.add_request(1, p, 10, 0);
  e.step(0);
  e.add_request(2, p, 10, 0);
  e.step(0.01);
  EXPECT_EQ(e.stats().prefix_cache_hits_total, 0u);
  EXPECT_EQ(e.block_pool().num_used(), 5u + 4u);  // 65 and 64 computed tokens, nothing shared
}

TEST(SimEngine, FreedCachedBlocksAreEvictedLeastRecentlyUsedFirst) {
  Engine e(small_config(12, true));
  std::mt19937 rng(9);
  const auto a = random_prompt(rng, 96);  // 6 blocks + 1 for the first token
  e.add_request(1, a, 1, 0);
  run_all(e);
  EXPECT_EQ(e.block_pool().num_used(), 0u);
  EXPECT_EQ(e.block_pool().num_cached(), 6u);
  const auto b = random_prompt(rng, 160);  // needs 10 blocks: evicts part of a's cache
  e.add_request(2, b, 1, 0);
  run_all(e);
  EXPECT_GT(e.block_pool().num_evictions(), 0u);
  const uint64_t hits_before = e.stats().prefix_cache_hits_total;
  e.add_request(3, a, 1, 0);
  run_all(e);
  EXPECT_LT(e.stats().prefix_cache_hits_total - hits_before, 80u);  // not all of a survived
}

TEST(SimEngine, ChunkedPrefillRespectsTokenBudget) {
  SimConfig cfg = small_config(1000, false);
  cfg.max_num_batched_tokens = 64;
  Engine e(cfg);
  std::mt19937 rng(1);
  e.add_request(1, random_prompt(rng, 200), 3, 0);
  int steps_to_first = 0;
  for (;;) {
    const StepPlan plan = e.schedule();
    EXPECT_LE(plan.num_tokens(), 64u);
    ++steps_to_first;
    if (!e.complete_step(steps_to_first).empty()) break;
  }
  EXPECT_EQ(steps_to_first, 4);  // ceil(200 / 64)
}

TEST(SimEngine, RunsAtMostMaxNumSeqs) {
  SimConfig cfg = small_config(1000, false);
  cfg.max_num_seqs = 3;
  Engine e(cfg);
  std::mt19937 rng(2);
  for (uint64_t id = 1; id <= 5; ++id)
    e.add_request(id, random_prompt(rng, 10), 5, 0);
  while (e.has_unfinished()) {
    e.step(0);
    EXPECT_LE(e.stats().num_running, 3u);
  }
  EXPECT_EQ(e.stats().requests_finished_total, 5u);
}

TEST(SimEngine, AbortFreesBlocks) {
  Engine e(small_config(100, false));
  std::mt19937 rng(4);
  e.add_request(1, random_prompt(rng, 40), 100, 0);
  e.step(0);
  EXPECT_EQ(e.block_pool().num_used(), 3u);
  EXPECT_TRUE(e.abort_request(1));
  EXPECT_FALSE(e.abort_request(1));
  EXPECT_EQ(e.block_pool().num_used(), 0u);
  EXPECT_FALSE(e.has_unfinished());
}

TEST(SimEngine, TtftIsRecordedInBuckets) {
  Engine e(small_config(100, false));
  std::mt19937 rng(4);
  e.add_request(1, random_prompt(rng, 10), 2, 1.0);
  e.step(1.03);  // ttft 30 ms: bucket le=0.04
  const auto s = e.stats();
  EXPECT_EQ(s.ttft_count, 1u);
  EXPECT_NEAR(s.ttft_sum_s, 0.03, 1e-9);
  EXPECT_EQ(s.ttft_bucket_counts[4], 1u);
  EXPECT_EQ(s.prompt_tokens_total, 10u);
}

TEST(SimEngine, RequestLengthCheckMatchesVllm) {
  SimConfig cfg;
  cfg.max_model_len = 1024;
  EXPECT_TRUE(check_request_length(cfg, 900, 124).has_value());
  const auto too_long = check_request_length(cfg, 1000, 100);
  ASSERT_FALSE(too_long.has_value());
  EXPECT_NE(too_long.error().message.find("maximum context length is 1024 tokens"),
            std::string::npos);
  EXPECT_NE(too_long.error().message.find("1000 input tokens"), std::string::npos);
  EXPECT_FALSE(check_request_length(cfg, 1024, 1).has_value());
  EXPECT_FALSE(check_request_length(cfg, 10, 0).has_value());
}

}  // namespace
}  // namespace kvprof::sim
