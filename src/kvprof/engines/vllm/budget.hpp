// vLLM V1's memory budget in two steps: a plan of what the model and its parallel split fix
// (per-rank weights, KV layouts and grouping, non-torch workspaces, CUDA graphs), built once and
// allocating, then the budget for one GPU size, utilization and batch shape, which allocates
// nothing. estimate_vllm() and the sweep (sweep.hpp) share both, so their figures are equal.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kvprof/engines/vllm/kv.hpp"
#include "kvprof/engines/vllm/releases.hpp"
#include "kvprof/estimate/activations.hpp"
#include "kvprof/estimate/settings.hpp"
#include "kvprof/estimate/weights.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/model_spec.hpp"

namespace kvprof::engines {

using estimate::ActivationModel;
using estimate::EngineSettings;
using estimate::KvLayout;
using estimate::Mxfp4Padding;
using estimate::WeightBreakdown;

inline constexpr uint32_t k_vllm_default_block_size = 16;
inline constexpr double k_vllm_default_gpu_memory_utilization = 0.9;
inline constexpr uint64_t k_vllm_v0_swap_space_bytes = 4ULL << 30;  // V0 --swap-space default

// True for GPUs release `r` gives its large batch defaults: >= 70 GiB and not an A100 from
// v0.9.0, >= 70 GiB in v0.8.5, named H100/H200 in v0.8.0 - v0.8.4; never in V0.
bool vllm_large_gpu(const gpu::GpuSpec& g, const VllmVersionRules& r);

// vLLM's defaults for `vllm serve` under release `r`: V0 batches max(max_model_len, 2048) tokens
// unchunked up to 32k tokens and chunks above; V1 takes 8192 tokens on large GPUs, else 2048,
// and 1024 sequences on large GPUs (on every GPU in v0.8.0 - v0.8.4), else 256, at most the
// batched tokens.
uint32_t vllm_default_max_num_batched_tokens(const VllmVersionRules& r, bool large_gpu,
                                             uint64_t max_model_len);
uint32_t vllm_default_max_num_seqs(const VllmVersionRules& r, bool large_gpu,
                                   uint32_t max_num_batched_tokens);

// The CUDA graphs release `r` captures for `max_num_seqs` (per set of draft lengths).
uint32_t vllm_cuda_graph_count(const VllmVersionRules& r, uint32_t max_num_seqs,
                               uint32_t graph_sets);

// vLLM's default max_model_len: the model's max_position_embeddings, else 4096.
uint64_t vllm_default_max_model_len(const model::ModelSpec& m);

// Fills the unset settings of `s` with vLLM's defaults for `m` on `g` (under release `r`).
void apply_vllm_defaults(EngineSettings& s, const model::ModelSpec& m, const gpu::GpuSpec& g,
                         const VllmVersionRules& r = vllm_default_version());

// What one (model, tensor x pipeline split, dtype, quantization, KV dtype) fixes.
struct VllmSplitPlan {
  const VllmVersionRules* rules = &vllm_default_version();
  uint32_t tp = 1;
  uint32_t pp = 1;
  uint32_t dp = 1;  // data-parallel ranks: their MoE layers run on the tokens of them all
  model::DType compute_dtype = model::DType::bf16;
  std::vector<WeightBreakdown> weights;   // per pipeline rank
  std::vector<KvLayout> layouts;          // per pipeline rank (the last one with the drafter's)
  std::vector<uint64_t> non_torch_bytes;  // per pipeline rank, on NVLink GPUs
  uint64_t tp_comm_bytes = 0;             // of those, the TP group's buffers (none on PCIe)
  VllmKvGeometry kv;
  uint64_t draft_weights_bytes = 0;  // the drafter's weights, charged to the last rank's budget
  uint64_t draft_bytes = 0;          // the drafter's weights in rank 0's total (pp == 1)
  uint64_t cuda_graph_bytes = 0;     // rank 0's graph pool, captured after the KV cache
};

// Plans `m` (with the speculative drafter `draft`, or nullptr) under the parallel sizes, KV
// dtype, block size and graph settings of `s`, which must have passed validate_parallelism;
// `block_size_set` says the user chose the block size; `r` is the release modelled; `mxfp4` pads
// MXFP4 experts as vLLM's MoE kernel for the GPU does (vllm_mxfp4_padding). Never fails;
// allocates.
VllmSplitPlan vllm_split_plan(const model::ModelSpec& m, const model::ModelSpec* draft,
                              const EngineSettings& s, model::DType compute_dtype,
                              const model::Quantization& quant, bool block_size_set,
                              const VllmVersionRules& r = vllm_default_version(),
                              Mxfp4Padding mxfp4 = {});

// How vLLM pads MXFP4 experts on `g`, by the MoE backend it picks there (mxfp4.py,
// get_mxfp4_backend and Mxfp4MoEMethod.create_weights): Blackwell datacenter GPUs (compute
// capability 10.x) use FlashInfer and round the intermediate and hidden sizes up to 256; Hopper
// (9.0) uses the Triton kernels and rounds the intermediate size up to 64; other NVIDIA GPUs use
// Marlin (intermediate to 128, hidden to 256); AMD Instinct rounds both to 128 (256 on CDNA4).
Mxfp4Padding vllm_mxfp4_padding(const gpu::GpuSpec& g);

// The settings a sweep varies, all resolved (no engine defaults left to fill).
struct VllmBatch {
  uint64_t gpu_memory_bytes = 0;
  double gpu_memory_utilization = k_vllm_default_gpu_memory_utilization;
  uint64_t max_model_len = 0;
  uint32_t max_num_seqs = 0;
  uint32_t max_num_batched_tokens = 0;
  std::optional<uint64_t> kv_cache_memory_bytes;  // --kv-cache-memory replaces the budget
  std::optional<uint32_t> num_gpu_blocks_override;
  bool pcie = false;  // the GPUs talk over PCIe: no large TP communication buffers
};

// Rank 0's figures (what vLLM logs) and the binding rank's budget.
struct VllmBudget {
  uint64_t requested_bytes = 0;  // total x gpu_memory_utilization
  uint32_t binding_rank = 0;     // the pipeline rank with the fewest blocks (the first of equals)
  int64_t available_bytes = 0;   // rank 0's KV budget, negative when over
  uint64_t charged_context_bytes = 0;     // the CUDA context the budget paid (older releases)
  uint64_t charged_cuda_graph_bytes = 0;  // the graphs' estimate the budget paid (v0.20 on)
  int64_t binding_available_bytes = 0;
  uint64_t activation_bytes = 0;  // rank 0's profile-run peak
  uint64_t non_torch_bytes = 0;   // rank 0's non-torch memory on this GPU (not the context)
  uint64_t binding_activation_bytes = 0;
  uint64_t num_blocks = 0;  // num_gpu_blocks
  VllmKvFigures kv;
  uint64_t kv_cache_bytes = 0;   // rank 0's pool: num_blocks x its block bytes
  uint64_t bytes_per_block = 0;  // rank 0's pool / num_blocks (0 without blocks)
  uint64_t total_bytes = 0;      // rank 0: weights + activations + non-torch + KV + graphs +
                                 // CUDA context + drafter
  bool starts = false;           // memory is left for blocks and one max_model_len request fits
};

// The budget of `plan` for `batch`; `act` is activation_model() of the planned model.
// Allocates nothing.
VllmBudget vllm_budget(const VllmSplitPlan& plan, const ActivationModel& act,
                       const VllmBatch& batch);

// KV bytes one request of `tokens` tokens takes from a pool of blocks of `bytes_per_block`.
uint64_t vllm_request_kv_bytes(const VllmKvGeometry& g, uint64_t bytes_per_block, uint64_t tokens,
                               uint32_t max_num_batched_tokens);

}  // namespace kvprof::engines
