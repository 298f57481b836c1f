// vLLM-shaped startup lines of serve-sim (see startup_log.hpp).
#include "kvprof/sim/startup_log.hpp"

#include <fmt/format.h>

#include "kvprof/util/units.hpp"

namespace kvprof::sim {

namespace {

std::string gib2(uint64_t bytes) {
  return fmt::format("{:.2f}", bytes_to_gib(bytes));
}

std::string with_commas(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

std::vector<std::string> vllm_startup_lines(const SimConfig& c, uint32_t pid) {
  const std::string api = fmt::format("(APIServer pid={}) INFO 01-01 00:00:00", pid);
  const std::string core = fmt::format("(EngineCore_DP0 pid={}) INFO 01-01 00:00:00", pid);
  const uint64_t kv_bytes = uint64_t{c.num_gpu_blocks} * c.kv_bytes_per_block;
  const uint64_t activation_bytes = c.activation_bytes_per_token * c.max_num_batched_tokens;
  const uint64_t kv_tokens = uint64_t{c.num_gpu_blocks} * c.block_size;
  std::string args = fmt::format("'model': '{}', 'max_num_seqs': {}, 'max_model_len': {}", c.model,
                                 c.max_num_seqs, c.max_model_len);
  if (c.enforce_eager) args += ", 'enforce_eager': True";
  std::vector<std::string> lines = {
      fmt::format("{} [api_server.py] vLLM API server version kvprof-sim", api),
      fmt::format("{} [utils.py] non-default args: {{{}}}", api, args),
      fmt::format("{} [gpu_model_runner.py] Model loading took {} GiB memory and 0.50 seconds",
                  core, gib2(c.weights_bytes)),
      fmt::format("{} [gpu_worker.py] Memory profiling takes 0.20 seconds. Total non KV cache "
                  "memory: {}GiB; torch peak memory increase: {}GiB; non-torch forward increase "
                  "memory: {}GiB; weights memory: {}GiB.",
                  core, gib2(c.weights_bytes + activation_bytes + c.non_torch_bytes),
                  gib2(activation_bytes), gib2(c.non_torch_bytes), gib2(c.weights_bytes)),
      fmt::format("{} [gpu_worker.py] Available KV cache memory: {} GiB", core, gib2(kv_bytes)),
      fmt::format("{} [kv_cache_utils.py] GPU KV cache size: {} tokens", core,
                  with_commas(kv_tokens)),
      fmt::format("{} [kv_cache_utils.py] Maximum concurrency for {} tokens per request: {:.2f}x",
                  core, with_commas(c.max_model_len),
                  static_cast<double>(kv_tokens) / std::max(1U, c.max_model_len)),
  };
  const auto passes = sim_graph_passes(c);
  for (const auto& p : passes) {
    lines.push_back(fmt::format(
        "Capturing CUDA graphs ({}): 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588"
        "\u2588| {}/{} [00:00<00:00, 100.00it/s]",
        p.description, p.graphs, p.graphs));
  }
  if (!passes.empty()) {
    lines.push_back(
        fmt::format("{} [gpu_model_runner.py] Graph capturing finished in 1 secs, took {} GiB",
                    core, gib2(c.cuda_graph_bytes)));
  }
  lines.push_back(
      fmt::format("{} [loggers.py] Engine 000: vllm cache_config_info with initialization after "
                  "num_gpu_blocks is: {}",
                  api, c.num_gpu_blocks));
  return lines;
}

}  // namespace kvprof::sim
