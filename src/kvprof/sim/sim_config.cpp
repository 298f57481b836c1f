// SimConfig validation, the step-time and memory models, and the mapping
// from `kvprof serve-sim` flags to a SimConfig.
#include "kvprof/sim/sim_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kvprof/estimate/activations.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/sim/sim_sizing.hpp"
#include "kvprof/util/net.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::sim {

namespace {

constexpr uint32_t k_max_block_size = 1024;
constexpr uint32_t k_max_blocks = 1U << 26;

}  // namespace

Expected<void> validate_sim_config(const SimConfig& c) {
  auto bad = [](std::string msg) { return fail(ErrorKind::usage, std::move(msg)); };
  if (!is_loopback_host(c.host)) {
    return bad(fmt::format("serve-sim binds loopback addresses only, not '{}'", c.host));
  }
  if (c.model.empty() || c.model.size() > 256) return bad("model name must be 1..256 characters");
  if (c.block_size == 0 || c.block_size > k_max_block_size) {
    return bad(fmt::format("block size must be 1..{}", k_max_block_size));
  }
  if (c.num_gpu_blocks == 0 || c.num_gpu_blocks > k_max_blocks) {
    return bad(fmt::format("num_gpu_blocks must be 1..{}", k_max_blocks));
  }
  if (c.max_num_seqs == 0) return bad("max_num_seqs must be at least 1");
  if (c.max_num_batched_tokens == 0) return bad("max_num_batched_tokens must be at least 1");
  if (c.max_model_len < 2) return bad("max_model_len must be at least 2");
  const uint64_t capacity_tokens = uint64_t{c.num_gpu_blocks} * c.block_size;
  if (c.max_model_len > capacity_tokens) {
    return bad(fmt::format(
        "max_model_len {} is larger than the KV cache holds ({} blocks x {} tokens = {} tokens); "
        "lower --max-model-len or raise --num-gpu-blocks",
        c.max_model_len, c.num_gpu_blocks, c.block_size, capacity_tokens));
  }
  if (!(c.step_base_ms >= 0 && c.step_base_ms <= 60000) || !(c.prefill_us_per_token >= 0) ||
      !(c.decode_us_per_token >= 0) || !std::isfinite(c.prefill_us_per_token) ||
      !std::isfinite(c.decode_us_per_token)) {
    return bad("step time parameters must be finite and >= 0 (step_base_ms <= 60000)");
  }
  if (!(c.fault_rate >= 0 && c.fault_rate <= 1)) return bad("fault rate must be in [0, 1]");
  if (c.fault_rate > 0 && c.fault.kind == FaultKind::none) {
    return bad("--fault-rate needs --fault-kind");
  }
  if (!(c.live_state_min_interval_ms >= 0)) return bad("live_state_min_interval_ms must be >= 0");
  return {};
}

double sim_step_ms(const SimConfig& c, uint32_t prefill_tokens, uint32_t decode_tokens) {
  return c.step_base_ms +
         (prefill_tokens * c.prefill_us_per_token + decode_tokens * c.decode_us_per_token) / 1000.0;
}

uint64_t sim_used_bytes(const SimConfig& c, uint32_t used_blocks, uint32_t step_tokens) {
  const uint64_t kv_blocks =
      c.kv_pool_mode == KvPoolMode::preallocated ? c.num_gpu_blocks : used_blocks;
  return c.non_torch_bytes + c.weights_bytes + kv_blocks * c.kv_bytes_per_block +
         c.cuda_graph_bytes + uint64_t{step_tokens} * c.activation_bytes_per_token;
}

std::vector<GraphPass> sim_graph_passes(const SimConfig& c) {
  if (c.enforce_eager || c.cuda_graph_sizes.empty()) return {};
  const auto full =
      static_cast<uint32_t>(std::count_if(c.cuda_graph_sizes.begin(), c.cuda_graph_sizes.end(),
                                          [&](uint32_t size) { return size <= c.max_num_seqs; }));
  std::vector<GraphPass> passes{
      {"mixed prefill-decode, PIECEWISE", static_cast<uint32_t>(c.cuda_graph_sizes.size())}};
  if (full > 0) passes.push_back({"decode, FULL", full});
  return passes;
}

uint32_t sim_cuda_graphs(const SimConfig& c) {
  uint32_t n = 0;
  for (const auto& p : sim_graph_passes(c))
    n += p.graphs;
  return n;
}

namespace {

// The CUDA graphs: capture sizes (given, or vLLM's default for max_num_seqs), the memory of one
// graph (given, or the sized pool over the graphs vLLM captures at `sized_max_num_seqs`), and
// their total.
Expected<void> apply_graph_flags(const SimFlags& f, uint32_t sized_max_num_seqs, SimConfig& c) {
  const uint32_t sized_graphs = estimate::vllm_cuda_graph_count(
      estimate::vllm_cuda_graph_sizes(sized_max_num_seqs), sized_max_num_seqs, 1);
  c.cuda_graph_bytes_per_graph =
      f.cuda_graph_bytes_per_graph.value_or(c.cuda_graph_bytes / std::max(sized_graphs, 1U));
  c.enforce_eager = f.enforce_eager;
  c.cuda_graph_sizes.clear();
  if (!c.enforce_eager) {
    c.cuda_graph_sizes = f.cuda_graph_sizes.empty()
                             ? estimate::vllm_cuda_graph_sizes(c.max_num_seqs)
                             : f.cuda_graph_sizes;
    if (c.cuda_graph_sizes.size() > 4096) {
      return fail(ErrorKind::usage, "--cuda-graph-sizes: at most 4096 sizes");
    }
    for (uint32_t size : c.cuda_graph_sizes) {
      if (size == 0 || size > (1U << 20)) {
        return fail(ErrorKind::usage, "--cuda-graph-sizes: each size must be 1..1048576");
      }
    }
    std::sort(c.cuda_graph_sizes.begin(), c.cuda_graph_sizes.end());
    c.cuda_graph_sizes.erase(std::unique(c.cuda_graph_sizes.begin(), c.cuda_graph_sizes.end()),
                             c.cuda_graph_sizes.end());
  }
  c.cuda_graph_bytes = uint64_t{sim_cuda_graphs(c)} * c.cuda_graph_bytes_per_graph;
  return {};
}

}  // namespace

Expected<SimConfig> sim_config_from_flags(const SimFlags& f) {
  SimConfig c;
  if (f.model.empty()) return fail(ErrorKind::usage, "--model is required");
  if (!iequals(f.engine, "vllm")) {
    return fail(ErrorKind::usage,
                fmt::format("serve-sim simulates the vllm engine only, not '{}'", f.engine));
  }
  c.model = f.model;
  c.host = f.host;
  c.port = f.port;
  if (!f.gpu.empty()) {
    auto gpu = gpu::find_gpu(f.gpu);
    if (!gpu) return std::unexpected(gpu.error());
    c.total_bytes = gpu->memory_bytes;
    c.gpu_name = gpu->name;
  }
  const auto planned = estimate_for_sim(f);
  if (!planned) return std::unexpected(planned.error());
  if (*planned) {
    if (auto ok = apply_estimate(**planned, c); !ok) return std::unexpected(ok.error());
    c.sizing = fmt::format("vLLM estimate of {} on {}", (*planned)->model_id, (*planned)->gpu.id);
    if (f.jitter_seed) {
      c.jitter = draw_engine_jitter(*f.jitter_seed);
      if (auto ok = apply_engine_jitter(**planned, *c.jitter, c); !ok) {
        return std::unexpected(ok.error());
      }
    }
  }
  const uint32_t sized_max_num_seqs = c.max_num_seqs;
  if (f.block_size) c.block_size = *f.block_size;
  if (f.max_num_seqs) c.max_num_seqs = *f.max_num_seqs;
  if (f.weights_bytes) c.weights_bytes = *f.weights_bytes;
  if (f.kv_bytes_per_block) c.kv_bytes_per_block = *f.kv_bytes_per_block;
  if (f.activation_bytes_per_token) c.activation_bytes_per_token = *f.activation_bytes_per_token;
  if (c.kv_bytes_per_block == 0) return fail(ErrorKind::usage, "--kv-bytes-per-block must be > 0");
  if (f.max_num_batched_tokens) c.max_num_batched_tokens = *f.max_num_batched_tokens;
  const bool resize = !*planned || f.weights_bytes || f.kv_bytes_per_block ||
                      f.activation_bytes_per_token || f.block_size;
  if (f.num_gpu_blocks) {
    c.num_gpu_blocks = *f.num_gpu_blocks;
  } else if (resize) {
    // Like vLLM's profile run: 90% of the GPU, minus the fixed parts and the peak activation of
    // a full step, divided into KV blocks.
    const double budget =
        0.9 * static_cast<double>(c.total_bytes) -
        static_cast<double>(c.weights_bytes + c.non_torch_bytes + c.cuda_graph_bytes) -
        static_cast<double>(c.activation_bytes_per_token) * c.max_num_batched_tokens;
    const double blocks = std::floor(budget / static_cast<double>(c.kv_bytes_per_block));
    if (blocks < 1) {
      return fail(ErrorKind::usage,
                  fmt::format("no memory left for the KV cache on {} with {} of weights", f.gpu,
                              format_bytes(c.weights_bytes)));
    }
    c.num_gpu_blocks = static_cast<uint32_t>(std::min<double>(blocks, k_max_blocks));
    if (*planned) c.sizing += " (resized by explicit flags)";
  }
  if (auto ok = apply_graph_flags(f, sized_max_num_seqs, c); !ok)
    return std::unexpected(ok.error());
  const uint64_t capacity_tokens = uint64_t{c.num_gpu_blocks} * std::max(1U, c.block_size);
  const uint64_t default_len = *planned ? c.max_model_len : 8192;
  c.max_model_len = f.max_model_len.value_or(
      static_cast<uint32_t>(std::min<uint64_t>(default_len, capacity_tokens)));
  if (f.tokens_per_s) {
    if (!(*f.tokens_per_s > 0)) return fail(ErrorKind::usage, "--tokens-per-s must be > 0");
    c.step_base_ms = 1000.0 / *f.tokens_per_s;
  }
  c.live_state_path = f.live_state_path;
  c.kv_pool_mode = f.kv_on_demand ? KvPoolMode::on_demand : KvPoolMode::preallocated;
  c.serve_metrics = !f.no_metrics;
  c.api_key = f.api_key;
  c.cors_origin = f.cors_origin;
  c.reject_token_prompts = f.reject_token_prompts;
  c.dcgm_hostname = f.dcgm_hostname;
  if (!f.fault_kind.empty()) {
    auto fault = parse_fault_spec(f.fault_kind);
    if (!fault) return fail(ErrorKind::usage, "--fault-kind: " + fault.error().message);
    c.fault = *fault;
  }
  c.fault_rate = f.fault_rate;
  c.fault_seed = f.fault_seed;
  if (c.fault.kind != FaultKind::none && !f.fault_kind.empty() && f.fault_rate == 0) {
    c.fault_rate = 1.0;  // --fault-kind alone: every request
  }
  if (auto ok = validate_sim_config(c); !ok) return std::unexpected(ok.error());
  return c;
}

}  // namespace kvprof::sim
