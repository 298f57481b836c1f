// vLLM V1's KV cache configuration: layers grouped by cache spec (full, sliding window, chunked
// local, MLA, Mamba state), page sizes unified, blocks per worker, the minimum over pipeline
// stages, and the figures vLLM logs ("GPU KV cache size", "Maximum concurrency").
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kvprof/estimate/kv.hpp"

namespace kvprof::engines {

using estimate::KvLayout;

struct VllmKvSpec {
  model::AttentionKind kind = model::AttentionKind::full;
  uint64_t bytes_per_token = 0;  // attention; 0 for state layers
  uint64_t state_bytes = 0;      // mamba / linear
  uint32_t window_tokens = 0;
  uint32_t block_size = 16;  // tokens per block (state layers: max_model_len)
  uint64_t page_bytes = 0;   // bytes per block per layer, after unification
};

struct VllmKvGroup {
  VllmKvSpec spec;
  std::vector<uint32_t> layers;  // global layer ids
};

// What vLLM's grouping fixes before memory is known: the groups, their block sizes and the
// bytes one block takes on each pipeline worker.
struct VllmKvGeometry {
  std::vector<VllmKvGroup> groups;  // empty: an attention-free model (only the null block)
  bool uniform_type = false;        // one group whose layers have different page sizes
  uint32_t attention_block_size = 16;
  std::vector<uint64_t> block_bytes_per_worker;  // one block on each worker, all its layers
};

struct VllmKvConfig : VllmKvGeometry {
  uint64_t num_blocks = 0;
  uint64_t kv_cache_tokens = 0;
  double max_concurrency = 0;
  uint64_t blocks_per_max_len_request = 0;
  std::vector<uint64_t> blocks_per_worker;
  std::vector<uint64_t> pool_bytes_per_worker;  // num_blocks * bytes per block on that worker
};

struct VllmKvParams {
  uint32_t block_size = 16;
  bool block_size_set = false;  // the user chose it (hybrid models otherwise enlarge it)
  uint64_t max_model_len = 0;
  uint32_t max_num_batched_tokens = 8192;
  std::optional<uint32_t> num_gpu_blocks_override;
};

// What vLLM logs once the number of blocks is known.
struct VllmKvFigures {
  uint64_t kv_cache_tokens = 0;  // "GPU KV cache size"
  uint64_t blocks_per_max_len_request = 0;
  double max_concurrency = 0;  // "Maximum concurrency for max_model_len"
};

// Groups the workers' layers by spec with block size `block_size` (enlarged for hybrid models
// unless `block_size_set`); allocates, so build it once per layout.
VllmKvGeometry vllm_kv_geometry(const std::vector<KvLayout>& workers, uint32_t block_size,
                                bool block_size_set);

// Blocks worker `worker` can hold in `available_bytes` (0 when none or negative).
uint64_t vllm_worker_blocks(const VllmKvGeometry& g, size_t worker, int64_t available_bytes);

// The logged figures for `num_blocks` blocks under `p` (no allocation).
VllmKvFigures vllm_kv_figures(const VllmKvGeometry& g, uint64_t num_blocks, const VllmKvParams& p);

// Builds the configuration from each pipeline worker's layout and available KV bytes.
VllmKvConfig vllm_kv_config(const std::vector<KvLayout>& workers,
                            const std::vector<int64_t>& available_bytes, const VllmKvParams& p);

// Blocks one request of `tokens` tokens needs under `g` (vLLM's max_memory_usage_bytes per
// group, in blocks).
uint64_t vllm_blocks_per_request(const VllmKvGeometry& g, uint64_t tokens,
                                 uint32_t max_num_batched_tokens);

}  // namespace kvprof::engines
