// Weight memory per GPU: each tensor's bytes under the checkpoint's or the engine's
// quantization, split over tensor / pipeline / expert parallel ranks like vLLM does.
#pragma once

#include <cstdint>
#include <utility>

#include "kvprof/estimate/tensors.hpp"
#include "kvprof/model/model_spec.hpp"

namespace kvprof::estimate {

struct WeightOptions {
  uint32_t tp = 1;
  uint32_t pp = 1;
  uint32_t pp_rank = 0;
  // How the routed experts are split: whole experts over `expert_parallel` ranks, each expert's
  // matrices over `expert_tp` (0: tp). vLLM: EP over tp x dp, or without EP a TP of tp x dp;
  // SGLang: --ep-size, and tp / ep inside each expert.
  uint32_t expert_parallel = 1;
  uint32_t expert_tp = 0;
  // The tensor-parallel width of the other roles (0: tp): attention (SGLang's DP attention:
  // tp / dp), dense MLPs and shared experts (--moe-dense-tp-size), the token embedding (DP
  // attention: 1) and the LM head (--enable-dp-lm-head: the attention's width).
  uint32_t attention_tp = 0;
  uint32_t dense_tp = 0;
  uint32_t embedding_tp = 0;
  uint32_t lm_head_tp = 0;
  model::DType compute_dtype = model::DType::bf16;  // dtype of unquantized tensors
  model::Quantization quant;                        // effective quantization
  uint32_t vocab_padding = 64;  // vLLM pads the vocabulary to a multiple of 64 before splitting
  bool rope_cache = true;       // the engine keeps a cos/sin cache buffer per rope config
};

struct WeightBreakdown {
  uint64_t total_bytes = 0;
  uint64_t embedding_bytes = 0;  // token embedding (+ positions)
  uint64_t lm_head_bytes = 0;
  uint64_t attention_bytes = 0;
  uint64_t mlp_bytes = 0;        // dense MLPs and shared experts
  uint64_t expert_bytes = 0;     // routed experts
  uint64_t other_bytes = 0;      // norms, routers, SSM mixers, vision tower
  uint64_t buffer_bytes = 0;     // non-parameter buffers the engine keeps (rope cos/sin cache)
  uint64_t offloaded_bytes = 0;  // decoder weights in pinned host memory (not in total_bytes)
  uint64_t params_total = 0;     // parameters of the whole model
  uint64_t params_on_rank = 0;
  uint32_t layers_on_rank = 0;
  bool exact = false;  // from the checkpoint's own tensor list
};

// The [first, last) decoder layers pipeline rank `rank` of `pp` holds (vLLM's split: the
// remainder goes to the ranks just before the last one).
std::pair<uint32_t, uint32_t> pp_layer_range(uint32_t n_layer, uint32_t pp, uint32_t rank);

// The tensor-parallel width of tensors of `role` under `o` (at least 1).
uint32_t role_tp(TensorRole role, const WeightOptions& o);

// Bytes of a linear weight of rows x cols (x count) stored under `quant` (unquantized tensors
// use `compute_dtype`), including scales, zeros and group indices.
uint64_t quantized_linear_bytes(uint64_t rows, uint64_t cols, uint64_t count,
                                const model::Quantization& quant, model::DType compute_dtype);

// True when `quant` leaves tensor `t` unquantized (ignore lists, routers, embeddings).
bool is_left_unquantized(const LogicalTensor& t, const model::Quantization& quant);

// How an engine pads MXFP4 expert matrices for its MoE kernel: the per-rank intermediate size
// and the hidden size of each routed expert are rounded up to multiples of these (1: none).
struct Mxfp4Padding {
  uint32_t intermediate_align = 1;
  uint32_t hidden_align = 1;
};

// Bytes the padding `p` adds to the routed experts one rank holds under `o` (packed 4-bit
// values, one scale byte per 32, and the bf16 biases of models that have them); 0 unless the
// quantization is MXFP4 and `m` is a mixture of experts.
uint64_t mxfp4_padding_bytes(const model::ModelSpec& m, const WeightOptions& o, Mxfp4Padding p);

// Weight bytes held by one rank: from the model's exact tensor list when it has one, else from
// the tensor inventory of its config.
WeightBreakdown weights_per_rank(const model::ModelSpec& m, const WeightOptions& options);

}  // namespace kvprof::estimate
