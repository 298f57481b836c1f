// The startup lines vLLM prints about its memory, in the wording of each modelled release.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvprof/engines/vllm/releases.hpp"

namespace kvprof::engines {

// The figures the lines carry (rank 0's, as vLLM logs them).
struct VllmLogFigures {
  uint64_t gpu_memory_bytes = 0;
  double gpu_memory_utilization = 0;
  uint64_t requested_bytes = 0;  // total x utilization
  uint64_t weights_bytes = 0;
  uint64_t activation_bytes = 0;  // torch peak increase of the profile run
  uint64_t non_torch_bytes = 0;   // non-torch increase (plus the CUDA context where charged)
  uint64_t available_kv_bytes = 0;
  uint64_t num_gpu_blocks = 0;
  uint64_t num_cpu_blocks = 0;  // V0: swap space / bytes per block
  uint64_t kv_cache_tokens = 0;
  uint64_t max_model_len = 0;
  double max_concurrency = 0;
  uint64_t cuda_graph_bytes = 0;
  bool enforce_eager = false;
};

struct VllmLogLines {
  std::vector<std::string> lines;
  size_t before_kv_check = 0;  // lines printed before vLLM checks one max-length request fits
};

// The lines release `r` prints for `f`, loading first and graph capture last.
VllmLogLines vllm_log_lines(const VllmVersionRules& r, const VllmLogFigures& f);

// 126256 -> "126,256" (V1's token counts).
std::string with_commas(uint64_t n);

}  // namespace kvprof::engines
