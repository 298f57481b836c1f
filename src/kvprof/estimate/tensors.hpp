// The logical tensor inventory of a decoder model built from its config (names like HF's), and
// how each tensor is split under tensor/pipeline/expert parallelism.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvprof/model/model_spec.hpp"

namespace kvprof::estimate {

enum class TensorRole : uint8_t {
  embedding,  // token embedding table
  lm_head,    // output projection (absent when tied)
  position,   // learned absolute position table
  attention,  // q/k/v/o and MLA projections
  mlp,        // dense MLP projections
  expert,     // routed expert projections (all experts of a layer in one entry)
  shared_expert,
  router,  // MoE gate / router
  norm,    // norms and their biases
  ssm,     // mamba / gated delta net mixers
  vision,  // parameters outside the text decoder
  mtp,     // multi-token-prediction layers (not loaded by engines without speculation)
};

// How a tensor is divided over tensor-parallel ranks.
enum class Shard : uint8_t {
  replicated,  // every rank holds the whole tensor
  column,      // output dim split (q, k, v, gate, up)
  row,         // input dim split (o, down)
  vocab,       // vocabulary rows split, after padding the vocab
  kv_heads,    // k/v projections: split by KV head, replicated when fewer heads than ranks
};

struct LogicalTensor {
  std::string name;
  TensorRole role = TensorRole::attention;
  Shard shard = Shard::replicated;
  uint64_t rows = 0;    // output features (or elements for vectors)
  uint64_t cols = 1;    // input features (1 for vectors)
  uint64_t count = 1;   // identical copies (experts of one layer)
  int32_t layer = -1;   // decoder layer, -1 for embedding/head/final norm
  bool linear = false;  // a matmul weight that checkpoint/runtime quantization applies to
  [[nodiscard]] uint64_t elements() const { return rows * cols * count; }
};

// All tensors of `m`'s text decoder (and one entry for extra_params), from its dimensions.
std::vector<LogicalTensor> decoder_tensors(const model::ModelSpec& m);

// Total parameters of the inventory (what the model card would call its size).
uint64_t count_params(const std::vector<LogicalTensor>& tensors);

}  // namespace kvprof::estimate
