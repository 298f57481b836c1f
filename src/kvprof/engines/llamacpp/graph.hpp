// llama.cpp's worst-case graph (the one llama_context reserves its compute buffer for: a ubatch
// of n_ubatch tokens, every one an output, attending to every cell of the cache) built node by
// node for the architectures kvprof models this way, so that ggml_alloc_replay gives the compute
// buffer libllama allocates. The node order, views and in-place ops follow the graphs the
// packaged libllama builds (its GGML_SCHED_DEBUG dump), per architecture family.
#pragma once

#include <cstdint>
#include <optional>

#include "kvprof/engines/llamacpp/ggml_graph.hpp"
#include "kvprof/model/model_spec.hpp"

namespace kvprof::engines {

// The shape of the reserved graph.
struct LlamaGraphShape {
  uint32_t n_tokens = 512;  // the ubatch
  uint32_t n_stream = 1;    // KV streams: 1 with a unified cache, else one per sequence
  uint32_t n_kv = 0;        // cells of a full-attention layer per stream
  uint32_t n_kv_swa = 0;    // cells of a sliding-window layer per stream
  bool flash_attn = true;
  uint32_t type_k = 1;  // ggml types of the cache
  uint32_t type_v = 1;
  uint32_t n_outputs = 0;  // rows the last layer keeps and the logits have (0: every token)
  // What differs between releases (releases.hpp): an f16 mask for flash attention (else an
  // f32 mask and its f16 copy), the mask's token rows padded to a multiple, the FFN's gate as
  // one op, the embeddings input, the early graph (K and V copied into the cache).
  bool mask_f16 = true;
  uint32_t mask_pad_tokens = 1;
  bool glu_op = true;
  bool embd_input = true;
  bool legacy_graph = false;
};

// True when `m`'s architecture has a node-by-node graph (llama and mistral, qwen2, qwen3,
// qwen3moe, phi3, gemma2, gemma3).
bool llamacpp_graph_supported(const model::ModelSpec& m);

// The reserved graph of `m`, or nullopt when its architecture has none.
std::optional<GgmlGraph> llamacpp_reserve_graph(const model::ModelSpec& m,
                                                const LlamaGraphShape& s);

// The CPU compute buffer llama.cpp reserves for `m` (ggml's CPU buffer alignment), or nullopt
// when its architecture has no graph.
std::optional<uint64_t> llamacpp_cpu_compute_bytes(const model::ModelSpec& m,
                                                   const LlamaGraphShape& s);

}  // namespace kvprof::engines
