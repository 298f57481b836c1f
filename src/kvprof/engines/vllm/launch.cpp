// vLLM's server flags read into a plan's settings (see launch_reading.hpp): `vllm serve MODEL`
// and `python -m vllm.entrypoints.openai.api_server --model MODEL`, with the flags that decide
// its memory. Flags kvprof does not plan are left to the caller's settings.

#include "kvprof/engines/vllm/vllm.hpp"
#include "kvprof/estimate/launch_flags.hpp"
#include "kvprof/util/command_flags.hpp"

namespace kvprof::engines {

namespace {

// Where vLLM's own arguments start in `words`, or 0 when the program is not vLLM's server.
size_t vllm_args_start(std::span<const std::string> words) {
  const auto program = program_name(words.front());
  if (program == "vllm" && words.size() > 1 && words[1] == "serve") return 2;
  return python_module_args_start(words, "vllm.entrypoints.openai.api_server");
}

using estimate::LaunchSetting;

// vLLM's flags that decide its memory, by its own names.
const estimate::LaunchFlag k_vllm_flags[] = {
    {{"--model"}, LaunchSetting::model, nullptr},
    {{"-tp", "--tensor-parallel-size"},
     LaunchSetting::tensor_parallel_size,
     "tensor-parallel-size"},
    {{"-pp", "--pipeline-parallel-size"},
     LaunchSetting::pipeline_parallel_size,
     "pipeline-parallel-size"},
    {{"-dp", "--data-parallel-size"}, LaunchSetting::data_parallel_size, "data-parallel-size"},
    {{"--enable-expert-parallel"}, LaunchSetting::enable_expert_parallel, "enable-expert-parallel"},
    {{"--max-model-len"}, LaunchSetting::max_model_len, "max-model-len"},
    {{"--gpu-memory-utilization"}, LaunchSetting::gpu_memory_utilization, "gpu-memory-utilization"},
    {{"--max-num-seqs"}, LaunchSetting::max_num_seqs, "max-num-seqs"},
    {{"--max-num-batched-tokens"}, LaunchSetting::max_num_batched_tokens, "max-num-batched-tokens"},
    {{"--block-size"}, LaunchSetting::block_size, "block-size"},
    {{"--kv-cache-dtype"}, LaunchSetting::kv_cache_dtype, "kv-cache-dtype"},
    {{"--dtype"}, LaunchSetting::dtype, "dtype"},
    {{"-q", "--quantization"}, LaunchSetting::quantization, "quantization"},
    {{"--enforce-eager"}, LaunchSetting::enforce_eager, "enforce-eager"},
    {{"--kv-cache-memory", "--kv-cache-memory-bytes"},
     LaunchSetting::kv_cache_memory_bytes,
     "kv-cache-memory"},
    {{"--cpu-offload-gb"}, LaunchSetting::cpu_offload_gib, "cpu-offload-gb"},
    {{"--swap-space"}, LaunchSetting::swap_space_gib, "swap-space"},
    {{"--kv-offloading-size"}, LaunchSetting::kv_offloading_gib, "kv-offloading-size"},
    {{"--kv-transfer-config"}, LaunchSetting::kv_transfer_config, "kv-transfer-config"},
    {{"--num-gpu-blocks-override"},
     LaunchSetting::num_gpu_blocks_override,
     "num-gpu-blocks-override"},
};

}  // namespace

bool read_vllm_command(std::span<const std::string> words, estimate::LaunchReading& out) {
  if (words.empty()) return false;
  const size_t start = vllm_args_start(words);
  if (start == 0) return false;
  out.program = start == 2 ? "vllm serve" : "vllm api_server";
  auto& s = out.settings;
  s.engine = Engine::vllm;
  auto args = words.subspan(start);
  if (start == 2 && !args.empty() && !args.front().starts_with("-")) {
    out.model = args.front();  // vllm serve MODEL
    args = args.subspan(1);
  }
  FlagWalk w(args);
  estimate::read_launch_flags(w, k_vllm_flags, out);
  return true;
}

}  // namespace kvprof::engines
