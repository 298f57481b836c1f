// BlockPool: reference-counted KV blocks, an intrusive LRU free queue, the prefix-cache map.
#include "kvprof/sim/block_pool.hpp"

namespace kvprof::sim {

uint64_t block_hash(uint64_t parent_hash, std::span<const uint32_t> token_ids) {
  // FNV-1a over the parent hash and the token ids, then a splitmix finaliser.
  uint64_t h = 1469598103934665603ULL;
  auto mix_byte = [&h](uint8_t b) {
    h ^= b;
    h *= 1099511628211ULL;
  };
  for (int i = 0; i < 8; ++i)
    mix_byte(static_cast<uint8_t>(parent_hash >> (8 * i)));
  for (uint32_t t : token_ids) {
    for (int i = 0; i < 4; ++i)
      mix_byte(static_cast<uint8_t>(t >> (8 * i)));
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

BlockPool::BlockPool(uint32_t num_blocks, bool enable_caching)
    : m_blocks(num_blocks), m_enable_caching(enable_caching) {
  for (BlockId id = 0; id < num_blocks; ++id)
    queue_push_back(id);
}

void BlockPool::queue_push_back(BlockId id) {
  Block& b = m_blocks[id];
  b.prev = m_tail;
  b.next = k_none;
  if (m_tail != k_none) {
    m_blocks[m_tail].next = id;
  } else {
    m_head = id;
  }
  m_tail = id;
  b.in_free_queue = true;
  ++m_num_free;
}

void BlockPool::queue_remove(BlockId id) {
  Block& b = m_blocks[id];
  if (b.prev != k_none) {
    m_blocks[b.prev].next = b.next;
  } else {
    m_head = b.next;
  }
  if (b.next != k_none) {
    m_blocks[b.next].prev = b.prev;
  } else {
    m_tail = b.prev;
  }
  b.prev = b.next = k_none;
  b.in_free_queue = false;
  --m_num_free;
}

std::optional<BlockId> BlockPool::lookup(uint64_t hash) const {
  const auto it = m_cached.find(hash);
  if (it == m_cached.end()) return std::nullopt;
  return it->second;
}

void BlockPool::touch(BlockId id) {
  Block& b = m_blocks[id];
  if (b.ref_count == 0 && b.in_free_queue) queue_remove(id);
  ++b.ref_count;
}

std::optional<BlockId> BlockPool::allocate() {
  if (m_head == k_none) return std::nullopt;
  const BlockId id = m_head;
  queue_remove(id);
  Block& b = m_blocks[id];
  if (b.cached) {
    m_cached.erase(b.hash);
    b.cached = false;
    ++m_num_evictions;
  }
  b.ref_count = 1;
  return id;
}

void BlockPool::release(BlockId id) {
  Block& b = m_blocks[id];
  if (b.ref_count == 0) return;  // defensive: never underflow
  if (--b.ref_count == 0) queue_push_back(id);
}

bool BlockPool::cache_block(BlockId id, uint64_t hash) {
  if (!m_enable_caching) return false;
  Block& b = m_blocks[id];
  if (b.cached) return false;
  if (!m_cached.emplace(hash, id).second) return false;
  b.cached = true;
  b.hash = hash;
  return true;
}

}  // namespace kvprof::sim
