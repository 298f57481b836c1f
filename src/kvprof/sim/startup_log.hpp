// The startup log serve-sim prints when asked to look like vLLM: the lines a vLLM V1 server
// prints about its memory (weights, profile run, KV cache, CUDA graph capture), made from the
// simulated sizes, so `profile --launch` reads a startup timeline and the engine's own figures
// (and the number of CUDA graphs captured) from a simulated server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvprof/sim/sim_config.hpp"

namespace kvprof::sim {

// vLLM-shaped startup lines for `config`, process id `pid` in the logger prefixes: the
// non-default args, "Model loading took", the memory profiling summary, "Available KV cache
// memory", "GPU KV cache size", "Maximum concurrency", one finished progress bar per CUDA graph
// capture pass and "Graph capturing finished" (neither with enforce_eager), the block count.
std::vector<std::string> vllm_startup_lines(const SimConfig& config, uint32_t pid);

}  // namespace kvprof::sim
