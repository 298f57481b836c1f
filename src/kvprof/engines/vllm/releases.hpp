// The vLLM releases the planner models, each as a small set of memory rules (engine generation,
// what the KV budget pays for, KV grouping, batch defaults, CUDA graph sizes, log wording). One
// table, read by the budget (budget.cpp), the activation model and the log lines; the
// sources of each rule are listed in docs/architecture.md ("vLLM versions").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kvprof/util/error.hpp"

namespace kvprof::engines {

// Which wording vLLM's startup lines use.
enum class VllmLogStyle : uint8_t {
  v0_6,      // V0 engine, "Loading model weights took X GB", "# GPU blocks: N, # CPU blocks: M"
  v0_7,      // V0 engine, the three-line "Memory profiling takes" report, "# CUDA blocks"
  v1_early,  // V1 engine before the memory_profiling report: "Available KV cache memory"
  v1,        // V1 with the debug "Total non KV cache memory" report (v0.10 and later)
};

// How `vllm serve` fills in max_num_batched_tokens and max_num_seqs (engine/arg_utils.py).
enum class VllmBatchDefaults : uint8_t {
  fixed,               // V0: the release's own figures (unchunked up to 32k, else chunked)
  h100_by_name,        // v0.8.0 - v0.8.4: 8192 tokens on GPUs named H100/H200, 1024 seqs on all
  by_memory,           // v0.8.5: 8192 tokens and 1024 seqs on GPUs of 70 GiB or more
  by_memory_not_a100,  // v0.9.0 on: the same, A100s excepted
};

struct VllmVersionRules {
  std::string_view name;      // "v0.7": what outputs name as the modelled version
  std::string_view releases;  // "v0.7.0 - v0.7.3": the releases the rules hold for
  bool v0_engine = false;     // V0 LLMEngine: swap space (CPU blocks), V0 scheduler defaults
  // The KV budget also pays the CUDA context and anything else on the GPU: vLLM took the used
  // memory after profiling (total - free) rather than the increase over a baseline snapshot.
  bool charges_cuda_context = false;
  bool hybrid_kv_groups = true;  // sliding-window layers form their own KV group
  VllmBatchDefaults batch_defaults = VllmBatchDefaults::by_memory_not_a100;
  uint32_t default_max_num_batched_tokens = 2048;  // V1 serve on other GPUs; V0 chunked prefill
  uint32_t default_max_num_seqs = 256;             // V0; V1 on GPUs that are not large
  uint32_t v0_unchunked_max_model_len = 32768;     // V0: chunked prefill above this length only
  double sampler_bytes_per_logit = 12.5;           // dummy sampler temporaries per (request, vocab)
  uint64_t non_torch_base_bytes = 72ULL << 20;     // cuBLAS handles and workspaces
  uint64_t non_torch_sampler_bytes = 184ULL << 20;  // sampling kernels' workspaces (last rank)
  uint32_t max_capture_size = 512;                  // largest CUDA graph batch size
  bool full_decode_graphs = true;            // FULL_AND_PIECEWISE: a full graph per decode size
  bool graph_sizes_step16_above_256 = true;  // 8-token steps to 256, then 16 (else 8 to the end)
  bool graph_sizes_capped_by_seqs = true;    // largest size min(2 x max_num_seqs, max)
  double cuda_graph_scale = 1.0;             // graph pool relative to the v0.19 calibration
  // v0.20 on: a dummy capture during profiling estimates the CUDA graphs, and the KV budget pays
  // for them (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 by default); before, graphs were
  // captured after the KV cache, outside the budget.
  bool budget_holds_cuda_graphs = false;
  double default_gpu_memory_utilization = 0.9;  // 0.92 from v0.20
  VllmLogStyle log_style = VllmLogStyle::v1;
  // How far the rules were checked against public startups of the release (said with every
  // estimate of an older release); empty for the calibrated newest one.
  std::string_view checked;
};

// Every modelled release, oldest first; the last is the newest ("latest").
std::span<const VllmVersionRules> vllm_versions();

// The newest modelled release ("latest": v0.20, for v0.20 and later).
const VllmVersionRules& vllm_latest_version();

// The release planned when none is named (v0.19): the newest one checked against public
// startups to within the error budgets.
const VllmVersionRules& vllm_default_version();

// The rules for "0.7", "v0.7.3", "0.10.1", "0.8.5.post1", "latest" or "" (= the default): the
// row whose releases cover it. A usage error naming the supported versions for anything else (V0
// before v0.6, or a release not modelled).
Expected<const VllmVersionRules*> parse_vllm_version(std::string_view text);

// "v0.6 (v0.6.0 - v0.6.4, V0 engine), ...; default v0.19": for help and error messages.
std::string vllm_supported_versions();

}  // namespace kvprof::engines
