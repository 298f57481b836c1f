// The simulated paged KV cache: a fixed pool of blocks with reference counts, a free queue in
// LRU order, and the prefix cache (full blocks found by the hash of their tokens and of the
// block before them), like vLLM V1's BlockPool.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace kvprof::sim {

using BlockId = uint32_t;

// The hash that names a full block: (hash of the previous block, the block's token ids).
uint64_t block_hash(uint64_t parent_hash, std::span<const uint32_t> token_ids);

class BlockPool {
 public:
  // A pool of `num_blocks` free blocks; with `enable_caching` false, cache_block() does nothing.
  BlockPool(uint32_t num_blocks, bool enable_caching);

  [[nodiscard]] uint32_t num_blocks() const { return static_cast<uint32_t>(m_blocks.size()); }
  // Blocks with no reference (including cached ones that may be evicted).
  [[nodiscard]] uint32_t num_free() const { return m_num_free; }
  [[nodiscard]] uint32_t num_used() const { return num_blocks() - m_num_free; }
  [[nodiscard]] uint64_t num_evictions() const { return m_num_evictions; }
  [[nodiscard]] size_t num_cached() const { return m_cached.size(); }
  [[nodiscard]] uint32_t ref_count(BlockId id) const { return m_blocks[id].ref_count; }

  // The cached block with `hash`, if any.
  [[nodiscard]] std::optional<BlockId> lookup(uint64_t hash) const;

  // Takes one more reference on block `id` (a cached block found by lookup()); a block with no
  // reference leaves the free queue.
  void touch(BlockId id);

  // Takes the least recently freed block (evicting its cache entry) with one reference;
  // nullopt when no block is free.
  std::optional<BlockId> allocate();

  // Drops one reference; at zero the block goes to the back of the free queue, still cached.
  void release(BlockId id);

  // Names full block `id` by `hash` for later lookups; false when caching is off, the block is
  // already named, or another block already has this hash.
  bool cache_block(BlockId id, uint64_t hash);

 private:
  static constexpr BlockId k_none = UINT32_MAX;
  struct Block {
    uint32_t ref_count = 0;
    bool cached = false;
    bool in_free_queue = false;
    uint64_t hash = 0;
    BlockId prev = k_none;
    BlockId next = k_none;
  };

  void queue_push_back(BlockId id);
  void queue_remove(BlockId id);

  std::vector<Block> m_blocks;
  BlockId m_head = k_none;  // next block to hand out
  BlockId m_tail = k_none;
  uint32_t m_num_free = 0;
  uint64_t m_num_evictions = 0;
  bool m_enable_caching = true;
  std::unordered_map<uint64_t, BlockId> m_cached;
};

}  // namespace kvprof::sim
