// SGLang's server flags read into a plan's settings (see launch_reading.hpp):
// `python -m sglang.launch_server --model-path MODEL` (and `sglang serve`), with the flags that
// decide its memory. Flags kvprof does not plan are left to the caller's settings.

#include "kvprof/engines/sglang/sglang.hpp"
#include "kvprof/estimate/launch_flags.hpp"
#include "kvprof/util/command_flags.hpp"

namespace kvprof::engines {

namespace {

// Where SGLang's own arguments start in `words`, or 0 when the program is not SGLang's server.
size_t sglang_args_start(std::span<const std::string> words) {
  const auto program = program_name(words.front());
  if (program == "sglang" && words.size() > 1 && words[1] == "serve") return 2;
  return python_module_args_start(words, "sglang.launch_server");
}

using estimate::LaunchSetting;

// SGLang's flags that decide its memory, by its own names, and the setting of kvprof's plan each
// stands for (its static memory fraction is vLLM's GPU memory utilization, its page size the
// block size, its running requests the sequences).
const estimate::LaunchFlag k_sglang_flags[] = {
    {{"--model-path", "--model"}, LaunchSetting::model, nullptr},
    {{"--tp", "--tp-size", "--tensor-parallel-size"},
     LaunchSetting::tensor_parallel_size,
     "tensor-parallel-size"},
    {{"--pp", "--pp-size", "--pipeline-parallel-size"},
     LaunchSetting::pipeline_parallel_size,
     "pipeline-parallel-size"},
    {{"--dp", "--dp-size", "--data-parallel-size"},
     LaunchSetting::data_parallel_size,
     "data-parallel-size"},
    {{"--enable-dp-attention"}, LaunchSetting::enable_dp_attention, "enable-dp-attention"},
    {{"--ep", "--ep-size", "--expert-parallel-size"},
     LaunchSetting::expert_parallel_size,
     "ep-size"},
    {{"--enable-ep-moe", "--enable-deepep-moe"},
     LaunchSetting::enable_expert_parallel,
     "enable-expert-parallel"},
    {{"--moe-a2a-backend"}, LaunchSetting::moe_a2a_backend, "moe-a2a-backend"},
    {{"--moe-dense-tp-size"}, LaunchSetting::moe_dense_tp_size, "moe-dense-tp-size"},
    {{"--enable-dp-lm-head"}, LaunchSetting::enable_dp_lm_head, "enable-dp-lm-head"},
    {{"--context-length"}, LaunchSetting::max_model_len, "max-model-len"},
    {{"--mem-fraction-static"}, LaunchSetting::gpu_memory_utilization, "gpu-memory-utilization"},
    {{"--max-running-requests"}, LaunchSetting::max_num_seqs, "max-num-seqs"},
    {{"--chunked-prefill-size"}, LaunchSetting::max_num_batched_tokens, "max-num-batched-tokens"},
    {{"--page-size"}, LaunchSetting::block_size, "block-size"},
    {{"--cuda-graph-max-bs"}, LaunchSetting::cuda_graph_max_bs, "cuda-graph-max-bs"},
    {{"--disable-cuda-graph"}, LaunchSetting::enforce_eager, "enforce-eager"},
    {{"--kv-cache-dtype"}, LaunchSetting::kv_cache_dtype, "kv-cache-dtype"},
    {{"--dtype"}, LaunchSetting::dtype, "dtype"},
    {{"--quantization"}, LaunchSetting::quantization, "quantization"},
};

}  // namespace

bool read_sglang_command(std::span<const std::string> words, estimate::LaunchReading& out) {
  if (words.empty()) return false;
  const size_t start = sglang_args_start(words);
  if (start == 0) return false;
  out.program = "sglang.launch_server";
  auto& s = out.settings;
  s.engine = Engine::sglang;
  FlagWalk w(words.subspan(start));
  estimate::read_launch_flags(w, k_sglang_flags, out);
  return true;
}

}  // namespace kvprof::engines
