// The plan settings a server's flags set, read by one loop from a table of each engine's own flag
// names (engines/<name>/launch.cpp): an engine whose flags mean settings kvprof plans lists its
// names, not another loop.
#pragma once

#include <initializer_list>
#include <span>
#include <string_view>

#include "kvprof/estimate/launch_reading.hpp"
#include "kvprof/util/command_flags.hpp"

namespace kvprof::estimate {

enum class LaunchSetting {
  model,                    // the model path or name
  tensor_parallel_size,     // a count above 0
  pipeline_parallel_size,   // a count above 0
  data_parallel_size,       // a count above 0
  enable_expert_parallel,   // a bare flag
  max_model_len,            // a count ("32768", "32k")
  gpu_memory_utilization,   // a fraction of the GPU
  max_num_seqs,             // a count above 0
  max_num_batched_tokens,   // a count above 0
  block_size,               // a count above 0
  cuda_graph_max_bs,        // a count above 0
  enforce_eager,            // a bare flag: no CUDA graphs
  kv_cache_dtype,           // auto, fp8, ...
  dtype,                    // auto or a dtype
  quantization,             // a method name
  kv_cache_memory_bytes,    // bytes ("8GiB")
  num_gpu_blocks_override,  // a count above 0
  enable_dp_attention,      // a bare flag
  expert_parallel_size,     // a count above 0
  moe_dense_tp_size,        // a count above 0
  enable_dp_lm_head,        // a bare flag
  moe_a2a_backend,          // deepep or mooncake: experts over the tp GPUs (SGLang)
  max_input_tokens,         // a count above 0 (TGI)
  cuda_graph_sizes,         // "1,2,4,8": the largest is the graphs' batch size, "0" none (TGI)
  cpu_offload_gib,          // GiB (vLLM --cpu-offload-gb)
  swap_space_gib,           // GiB (vLLM --swap-space)
  kv_offloading_gib,        // GiB (vLLM --kv-offloading-size)
  kv_transfer_config,       // a connector's JSON (vLLM --kv-transfer-config)
};

// One flag of an engine: its names and the setting it sets; `given` is the setting's name in
// kvprof estimate's flags ("max-model-len"), recorded in LaunchReading::given when it is set.
struct LaunchFlag {
  std::initializer_list<std::string_view> names;
  LaunchSetting setting;
  const char* given;
};

// Reads every flag of `walk` that `flags` names into `out`; other flags, and values that do not
// read as their setting, are left as they are.
void read_launch_flags(FlagWalk& walk, std::span<const LaunchFlag> flags, LaunchReading& out);

}  // namespace kvprof::estimate
