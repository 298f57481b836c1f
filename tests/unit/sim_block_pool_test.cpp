// Tests for src/kvprof/sim/block_pool.cpp: reference counts, LRU free queue, prefix-cache map.
#include "kvprof/sim/block_pool.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace kvprof::sim {
namespace {

TEST(SimBlockPool, AllocatesEveryBlockOnceThenRunsOut) {
  BlockPool pool(4, true);
  std::vector<BlockId> got;
  for (int i = 0; i < 4; ++i) {
    auto b = pool.allocate();
    ASSERT_TRUE(b.has_value());
    got.push_back(*b);
  }
  EXPECT_FALSE(pool.allocate().has_value());
  EXPECT_EQ(pool.num_used(), 4u);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(std::unique(got.begin(), got.end()), got.end());
  pool.release(got[2]);
  EXPECT_EQ(pool.num_free(), 1u);
  EXPECT_EQ(pool.allocate(), got[2]);
}

TEST(SimBlockPool, SharedBlockIsFreedOnlyByTheLastReference) {
  BlockPool pool(2, true);
  const BlockId b = *pool.allocate();
  ASSERT_TRUE(pool.cache_block(b, 42));
  EXPECT_EQ(pool.lookup(42), b);
  pool.touch(b);
  EXPECT_EQ(pool.ref_count(b), 2u);
  pool.release(b);
  EXPECT_EQ(pool.num_free(), 1u);  // still held once
  pool.release(b);
  EXPECT_EQ(pool.num_free(), 2u);
  EXPECT_EQ(pool.lookup(42), b);  // free but still cached
  pool.touch(b);                  // a cache hit revives it
  EXPECT_EQ(pool.num_free(), 1u);
}

TEST(SimBlockPool, EvictsLeastRecentlyFreedCachedBlockFirst) {
  BlockPool pool(3, true);
  const BlockId a = *pool.allocate();
  const BlockId b = *pool.allocate();
  const BlockId c = *pool.allocate();
  pool.cache_block(a, 1);
  pool.cache_block(b, 2);
  pool.cache_block(c, 3);
  pool.release(b);  // freed first: evicted first
  pool.release(a);
  pool.release(c);
  EXPECT_EQ(pool.allocate(), b);
  EXPECT_FALSE(pool.lookup(2).has_value());
  EXPECT_EQ(pool.lookup(1), a);
  EXPECT_EQ(pool.num_evictions(), 1u);
  EXPECT_EQ(pool.allocate(), a);
  EXPECT_EQ(pool.num_cached(), 1u);
}

TEST(SimBlockPool, CachingDisabledOrDuplicateHashIsRefused) {
  BlockPool off(2, false);
  EXPECT_FALSE(off.cache_block(*off.allocate(), 7));
  EXPECT_FALSE(off.lookup(7).has_value());
  BlockPool on(2, true);
  const BlockId x = *on.allocate();
  const BlockId y = *on.allocate();
  EXPECT_TRUE(on.cache_block(x, 7));
  EXPECT_FALSE(on.cache_block(y, 7));
  EXPECT_EQ(on.lookup(7), x);
}

TEST(SimBlockPool, BlockHashDependsOnParentAndTokens) {
  const std::vector<uint32_t> t1{1, 2, 3}, t2{1, 2, 4};
  EXPECT_EQ(block_hash(0, t1), block_hash(0, t1));
  EXPECT_NE(block_hash(0, t1), block_hash(0, t2));
  EXPECT_NE(block_hash(0, t1), block_hash(1, t1));
}

}  // namespace
}  // namespace kvprof::sim
