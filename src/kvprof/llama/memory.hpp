// What llama.cpp allocated, per buffer type, to the byte: llama_get_memory_breakdown(), a C++
// entry point of libllama (llama-ext.h) that the C API lacks. It returns a std::map, so it is
// only called on the llama.cpp versions whose layout LlamaLib checked; an empty list otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvprof/llama/engine.hpp"

namespace kvprof::llama {

// Memory of one ggml buffer type ("CPU", "CPU_Mapped", "CPU_REPACK", "CUDA0", "CUDA_Host").
struct BufferMemory {
  std::string buffer_type;
  uint64_t model_bytes = 0;    // weights
  uint64_t context_bytes = 0;  // the KV cache (and recurrent state)
  uint64_t compute_bytes = 0;  // compute buffers reserved for the worst-case graph
};

// The breakdown of `ctx` (and its model); empty when the library does not export it.
std::vector<BufferMemory> memory_breakdown(const LlamaLib& lib, const LlamaContext& ctx);

}  // namespace kvprof::llama
