// Transient memory: the peak of an engine's profile run (forward pass at the token budget and
// the dummy sampler over the request budget), non-torch workspaces, and CUDA graph pools.
#pragma once

#include <cstdint>
#include <vector>

#include "kvprof/model/model_spec.hpp"

namespace kvprof::estimate {

struct ProfileRunShape {
  uint32_t tokens = 8192;    // max_num_batched_tokens of the dummy forward
  uint32_t requests = 1024;  // sequences whose logits the dummy sampler computes
  uint32_t tp = 1;
  // Data-parallel ranks: vLLM gathers the tokens of every DP rank before an MoE layer's experts
  // (its all2all dispatch), so each rank's experts run on tokens x dp, chunked by the fused-MoE
  // kernel's 32,768.
  uint32_t dp = 1;
  bool first_pp_rank = true;
  bool last_pp_rank = true;  // only the last rank computes logits and samples
  bool pipeline = false;     // pp > 1: intermediate tensors are kept for send/receive
  model::DType compute_dtype = model::DType::bf16;
  double sampler_bytes_per_logit = 12.5;  // plus the logits dtype (the release's sampler)
};

struct ActivationBreakdown {
  uint64_t persistent_bytes = 0;  // buffers that outlive the forward (hidden states, MoE workspace)
  uint64_t forward_bytes = 0;     // transient forward peak (MLP intermediates, qkv)
  uint64_t sampler_bytes = 0;     // logits and sampling temporaries (last rank)
  uint64_t peak_bytes = 0;        // persistent + max(forward, sampler)
};

// The model dimensions the profile-run peak depends on, gathered once so a sweep over batch
// shapes does not walk the layers again.
struct ActivationModel {
  uint64_t hidden_size = 0;
  uint64_t vocab_size = 0;
  bool moe = false;
  uint64_t expert_intermediate_size = 0;
  uint32_t n_expert_used = 0;
  uint64_t dense_intermediate_size = 0;  // largest dense MLP or shared-expert block
};

// The activation-relevant dimensions of `m`.
ActivationModel activation_model(const model::ModelSpec& m);

// vLLM V1's "torch peak memory increase" during its profile run, for one rank.
ActivationBreakdown profile_run_peak(const ActivationModel& a, const ProfileRunShape& shape);

// Same, from the model itself.
ActivationBreakdown profile_run_peak(const model::ModelSpec& m, const ProfileRunShape& shape);

// vLLM's "non-torch forward increase memory" for one rank: cuBLAS/sampler workspaces, plus the
// NCCL and custom all-reduce buffers when tp > 1 (tp_comm_bytes).
uint64_t non_torch_bytes(uint32_t tp, bool last_pp_rank);

// The communication buffers of a TP group on NVLink/NVSwitch GPUs (NCCL's NVLS and the
// symmetric-memory all-reduce, calibrated on H100 SXM startups); 0 for tp 1. GPUs on PCIe hold
// almost none of it: NVLS needs NVSwitch and vLLM turns its custom all-reduce off above two PCIe
// GPUs (a v0.10.2 startup on 8 L40S printed 0.18 GiB of non-torch memory in all).
uint64_t tp_comm_bytes(uint32_t tp);

// Same with the release's own cuBLAS (`base_bytes`) and sampler (`sampler_bytes`) workspaces.
uint64_t non_torch_bytes(uint32_t tp, bool last_pp_rank, uint64_t base_bytes,
                         uint64_t sampler_bytes);

// Memory of vLLM's CUDA graph pool (piecewise + full decode graphs up to 512 tokens) for one
// rank holding `n_layers_on_rank` layers; `graph_sets` > 1 when several draft lengths are
// captured (speculative decoding with runtime control).
uint64_t cuda_graph_bytes(const model::ModelSpec& m, uint32_t n_layers_on_rank, uint32_t tp,
                          uint32_t graph_sets);

// vLLM's default CUDA graph capture sizes for `max_num_seqs`: 1, 2, 4, the multiples of 8 below
// 256, then the multiples of 16 up to min(2 x max_num_seqs, 512).
std::vector<uint32_t> vllm_cuda_graph_sizes(uint32_t max_num_seqs);

// The capture sizes of an older release: 1, 2, 4, then multiples of 8 (of 16 above 256 when
// `step16_above_256`) up to `max_size`.
std::vector<uint32_t> vllm_cuda_graph_sizes(uint32_t max_size, bool step16_above_256);

// The graphs vLLM captures (FULL_AND_PIECEWISE): one piecewise graph per capture size plus one
// full decode graph per size up to `max_num_seqs`, times `graph_sets`.
uint32_t vllm_cuda_graph_count(const std::vector<uint32_t>& sizes, uint32_t max_num_seqs,
                               uint32_t graph_sets);

// TensorRT-LLM's CUDA graph batch sizes (CudaGraphConfig without padding: 1..31, 32, 64, 128,
// then powers of two from 256 below `max_batch_size`), those up to `max_batch_size`. The
// PyTorch backend's cuda_graph_config.max_batch_size defaults to 128, and the warm-up captures
// the sizes up to the engine's max_batch_size too.
std::vector<uint32_t> trtllm_cuda_graph_sizes(uint32_t max_batch_size);

// CUDA context + allocator baseline present before any weights load (about 0.5 GiB on H100).
inline constexpr uint64_t k_cuda_context_bytes = 512ULL << 20;

}  // namespace kvprof::estimate
