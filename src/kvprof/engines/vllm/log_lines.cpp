// vLLM's memory lines per release: V0's worker.py / executor_base.py report (v0.6, v0.7) and
// V1's gpu_model_runner.py / gpu_worker.py / kv_cache_utils.py lines (v0.8 and later).
#include "kvprof/engines/vllm/log_lines.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kvprof/util/units.hpp"

namespace kvprof::engines {

namespace {

std::string gib2(uint64_t bytes) {
  return fmt::format("{:.2f}", bytes_to_gib(bytes));
}

void v0_lines(const VllmVersionRules& r, const VllmLogFigures& f, VllmLogLines& out) {
  auto& l = out.lines;
  l.push_back(fmt::format("Loading model weights took {:.4f} GB", bytes_to_gib(f.weights_bytes)));
  if (r.log_style == VllmLogStyle::v0_6) {
    l.push_back(fmt::format(
        "Memory profiling results: total_gpu_memory {}GiB; gpu_memory_utilization {:.2f}; the "
        "current vLLM instance can use {}GiB; model weights take {}GiB; non_torch_memory {}GiB; "
        "PyTorch activation peak memory {}GiB; available_kv_cache_memory {}GiB",
        gib2(f.gpu_memory_bytes), f.gpu_memory_utilization, gib2(f.requested_bytes),
        gib2(f.weights_bytes), gib2(f.non_torch_bytes), gib2(f.activation_bytes),
        gib2(f.available_kv_bytes)));
    l.push_back(
        fmt::format("# GPU blocks: {}, # CPU blocks: {}", f.num_gpu_blocks, f.num_cpu_blocks));
  } else {
    l.push_back("Memory profiling takes ... seconds");
    l.push_back(fmt::format(
        "the current vLLM instance can use total_gpu_memory ({}GiB) x gpu_memory_utilization "
        "({:.2f}) = {}GiB",
        gib2(f.gpu_memory_bytes), f.gpu_memory_utilization, gib2(f.requested_bytes)));
    l.push_back(fmt::format(
        "model weights take {}GiB; non_torch_memory takes {}GiB; PyTorch activation peak memory "
        "takes {}GiB; the rest of the memory reserved for KV Cache is {}GiB.",
        gib2(f.weights_bytes), gib2(f.non_torch_bytes), gib2(f.activation_bytes),
        gib2(f.available_kv_bytes)));
    l.push_back(
        fmt::format("# CUDA blocks: {}, # CPU blocks: {}", f.num_gpu_blocks, f.num_cpu_blocks));
    l.push_back(fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x",
                            f.max_model_len, f.max_concurrency));
  }
  // V0 checks the max-length request after printing the blocks (initialize_cache).
  out.before_kv_check = l.size();
}

}  // namespace

std::string with_commas(uint64_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

VllmLogLines vllm_log_lines(const VllmVersionRules& r, const VllmLogFigures& f) {
  VllmLogLines out;
  auto& l = out.lines;
  if (r.v0_engine) {
    v0_lines(r, f, out);
  } else if (r.log_style == VllmLogStyle::v1_early) {
    l.push_back(fmt::format("Model loading took {:.4f} GiB and ... seconds",
                            bytes_to_gib(f.weights_bytes)));
    out.before_kv_check = l.size();
    l.push_back(fmt::format("GPU KV cache size: {} tokens", with_commas(f.kv_cache_tokens)));
    l.push_back(fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x",
                            with_commas(f.max_model_len), f.max_concurrency));
  } else {
    const uint64_t non_kv = f.weights_bytes + f.activation_bytes + f.non_torch_bytes;
    l.push_back(fmt::format("Model loading took {} GiB memory", gib2(f.weights_bytes)));
    l.push_back(fmt::format(
        "Memory profiling takes ... Total non KV cache memory: {}GiB; torch peak memory "
        "increase: {}GiB; non-torch forward increase memory: {}GiB; weights memory: {}GiB.",
        gib2(non_kv), gib2(f.activation_bytes), gib2(f.non_torch_bytes), gib2(f.weights_bytes)));
    if (r.budget_holds_cuda_graphs && !f.enforce_eager && f.gpu_memory_bytes > 0) {
      const double share =
          static_cast<double>(f.cuda_graph_bytes) / static_cast<double>(f.gpu_memory_bytes);
      l.push_back(
          fmt::format("Estimated CUDA graph memory: {} GiB total", gib2(f.cuda_graph_bytes)));
      l.push_back(fmt::format(
          "CUDA graph memory profiling is enabled (default since v0.21.0). The current "
          "--gpu-memory-utilization={:.4f} is equivalent to --gpu-memory-utilization={:.4f} "
          "without CUDA graph memory profiling. To maintain the same effective KV cache size as "
          "before, increase --gpu-memory-utilization to {:.4f}. To disable, set "
          "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.",
          f.gpu_memory_utilization, f.gpu_memory_utilization - share,
          std::min(f.gpu_memory_utilization + share, 1.0)));
    }
    l.push_back(fmt::format("Available KV cache memory: {} GiB", gib2(f.available_kv_bytes)));
    out.before_kv_check = l.size();
    l.push_back(fmt::format("GPU KV cache size: {} tokens", with_commas(f.kv_cache_tokens)));
    l.push_back(fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x",
                            with_commas(f.max_model_len), f.max_concurrency));
  }
  if (!f.enforce_eager) {
    l.push_back(
        fmt::format("Graph capturing finished in ... secs, took {} GiB", gib2(f.cuda_graph_bytes)));
  }
  return out;
}

}  // namespace kvprof::engines
