// KV cache geometry per GPU: bytes per token per layer for each attention kind (full, sliding,
// chunked, MLA), constant per-request state for SSM / linear-attention layers, under TP/PP.
#pragma once

#include <cstdint>
#include <vector>

#include "kvprof/estimate/settings.hpp"
#include "kvprof/model/model_spec.hpp"

namespace kvprof::estimate {

// Bytes per KV element times 32 (q8_0 and q4_0 are 34 and 18 bytes per 32 elements).
uint64_t kv_element_bytes_x32(KvCacheDtype kv, model::DType compute_dtype);

// One DSA layer's cache per token (DeepSeek-V3.2, GLM-5): the MLA latent (fp8_ds_mla when the
// element is fp8) plus, where the layer has an indexer, the indexer's fp8 keys with their scales.
uint64_t dsa_bytes_per_token(const model::ModelSpec& m, const model::LayerSpec& layer,
                             uint64_t elem_x32);

// One layer's cache on one rank.
struct KvLayerSpec {
  uint32_t layer = 0;
  model::AttentionKind kind = model::AttentionKind::full;
  uint64_t bytes_per_token = 0;  // attention kinds: K+V (or MLA latent) bytes per token
  uint32_t window_tokens = 0;    // sliding / chunked window
  uint64_t state_bytes = 0;      // mamba / linear: conv + recurrent state per request
};

struct KvLayout {
  std::vector<KvLayerSpec> layers;       // the layers on this rank that keep a cache or state
  uint64_t kv_bytes_per_token = 0;       // sum over attention layers (window ignored)
  uint64_t state_bytes_per_request = 0;  // sum over SSM / linear layers
  uint32_t kv_heads_per_rank = 0;
  bool kv_heads_replicated = false;  // fewer KV heads than TP ranks
};

// The cache layout of pipeline rank `pp_rank` under `tp` with element type `kv`.
KvLayout kv_layout(const model::ModelSpec& m, uint32_t tp, uint32_t pp, uint32_t pp_rank,
                   KvCacheDtype kv, model::DType compute_dtype);

// KV + state bytes one request of `tokens` tokens holds on this rank, with sliding and chunked
// layers bounded by their window (engine paging not included).
uint64_t request_cache_bytes(const KvLayout& layout, uint64_t tokens);

}  // namespace kvprof::estimate
