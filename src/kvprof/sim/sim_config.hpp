// Configuration of the SIMULATED OpenAI-compatible engine behind `kvprof serve-sim`: paged KV
// cache sizes and scheduler limits (vLLM V1 names), the step-time model, the simulated GPU memory
// figures written to the live-state file, and fault injection for tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/serve/fault.hpp"
#include "kvprof/sim/sim_jitter.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::sim {

// Faults (serve/fault.hpp) are the front end's; the simulator's flags configure them.
using serve::fault_kind_name;
using serve::FaultKind;
using serve::FaultSpec;
using serve::parse_fault_spec;

// How the KV pool shows in the simulated memory: all blocks at startup (what vLLM does), or
// only the blocks in use (handy to watch the cache fill in tests and plots).
enum class KvPoolMode { preallocated, on_demand };

struct SimConfig {
  std::string model = "kvprof-sim";  // served model name (/v1/models id, metrics model_name)
  std::string host = "127.0.0.1";    // loopback only
  uint16_t port = 0;                 // 0 = pick a free port
  bool quiet = false;                // no startup log line on stderr

  // Paged KV cache and scheduler limits, as vLLM V1 names them.
  uint32_t num_gpu_blocks = 2048;
  uint32_t block_size = 16;  // tokens per block
  uint32_t max_num_seqs = 256;
  uint32_t max_num_batched_tokens = 8192;  // token budget per step (chunked prefill)
  uint32_t max_model_len = 8192;           // prompt + max_tokens limit per request
  bool enable_prefix_caching = true;
  bool serve_metrics = true;  // false: GET /metrics answers 404 (tests of a missing endpoint)
  // Non-empty: /v1/* wants "Authorization: Bearer <api_key>" and answers 401 otherwise (vLLM's
  // --api-key; /health, /metrics and /version stay open).
  std::string api_key;
  std::string cors_origin;  // see serve::ServerOptions::cors_origin
  // A /v1/completions prompt of token IDs gets 400 with llama.cpp's wording (a server that takes
  // only text prompts).
  bool reject_token_prompts = false;
  // Non-empty: GET /dcgm/metrics answers as NVIDIA's DCGM exporter would for the simulated GPU
  // (DCGM_FI_DEV_FB_USED/FREE/RESERVED in MiB, labelled gpu, UUID, device, modelName and this
  // Hostname), for tests of remote GPU sources.
  std::string dcgm_hostname;
  std::string gpu_name = "kvprof-sim GPU";  // the simulated GPU as the driver would name it

  // Step time: step_ms = step_base_ms + (prefill_tokens * prefill_us_per_token
  //                                      + decode_tokens * decode_us_per_token) / 1000.
  // A lone decoding sequence thus gets about 1000 / step_base_ms tokens/s.
  double step_base_ms = 2.0;
  double prefill_us_per_token = 2.0;
  double decode_us_per_token = 10.0;

  // Simulated GPU memory (bytes), written to the live-state file:
  // used = non_torch + weights + KV pool + cuda graphs + activation of the current step.
  uint64_t total_bytes = 80ULL << 30;  // what NVML reports as total
  uint64_t reserved_bytes = 0;         // driver-reserved (NVML v2 "reserved")
  uint64_t weights_bytes = 15ULL << 30;
  uint64_t non_torch_bytes = 512ULL << 20;   // CUDA context, NCCL, cuBLAS workspaces
  uint64_t cuda_graph_bytes = 512ULL << 20;  // all graphs: cuda_graph_sizes' graphs x per graph
  // CUDA graphs as vLLM captures them (FULL_AND_PIECEWISE): one piecewise graph per capture size
  // and one full decode graph per size up to max_num_seqs; none with enforce_eager.
  bool enforce_eager = false;
  std::vector<uint32_t> cuda_graph_sizes;  // ascending; empty with enforce_eager
  uint64_t cuda_graph_bytes_per_graph = 0;
  uint64_t activation_bytes_per_token = 64ULL << 10;  // per token scheduled in a step
  uint64_t kv_bytes_per_block = 2ULL << 20;
  KvPoolMode kv_pool_mode = KvPoolMode::preallocated;
  std::string live_state_path;              // empty = no live-state file
  double live_state_min_interval_ms = 5.0;  // rewrite at most this often

  // Faults: every completion request gets `fault` with probability fault_rate, decided by a
  // deterministic draw from (fault_seed, request number); X-Kvprof-Fault overrides per request.
  FaultSpec fault;
  double fault_rate = 0.0;
  uint64_t fault_seed = 1;

  // How the sizes were chosen, for logs and manifests ("vLLM estimate of MODEL on GPU" or
  // "placeholder sizes").
  std::string sizing = "placeholder sizes";
  // The engine jitter the sizes were drawn with (sim_jitter.hpp); none: the plan's figures.
  std::optional<EngineJitter> jitter;
};

// One CUDA graph capture pass as vLLM's progress bar names it.
struct GraphPass {
  std::string description;  // "mixed prefill-decode, PIECEWISE", "decode, FULL"
  uint32_t graphs = 0;
};

// The capture passes of `config` (none with enforce_eager or no capture sizes).
std::vector<GraphPass> sim_graph_passes(const SimConfig& config);

// The graphs of all passes.
uint32_t sim_cuda_graphs(const SimConfig& config);

// Returns a usage error naming the first impossible setting (no blocks, a non-loopback host,
// max_model_len larger than the KV cache holds, ...).
Expected<void> validate_sim_config(const SimConfig& config);

// The simulated duration of one engine step with these scheduled tokens, in ms.
double sim_step_ms(const SimConfig& config, uint32_t prefill_tokens, uint32_t decode_tokens);

// The bytes the simulated GPU shows in use with `used_blocks` KV blocks held and `step_tokens`
// tokens in the step being executed (0 when idle).
uint64_t sim_used_bytes(const SimConfig& config, uint32_t used_blocks, uint32_t step_tokens);

// `kvprof serve-sim` flags; unset optionals take the defaults described in --help.
struct SimFlags {
  std::string model;            // served model name (required)
  std::string gpu;              // catalog GPU; sets total_bytes (required)
  std::string engine = "vllm";  // only "vllm" is simulated
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  // Sizes default to a vLLM estimate of `model` on `gpu` when the model is a catalog id or model
  // file; otherwise to placeholders (15 GiB weights, 2 MiB blocks, 90% of the GPU).
  std::optional<uint32_t> num_gpu_blocks;
  std::optional<uint32_t> block_size;              // default: the estimate's, else 16
  std::optional<uint32_t> max_num_seqs;            // default: the estimate's, else 256
  std::optional<uint32_t> max_num_batched_tokens;  // default 8192
  std::optional<uint32_t> max_model_len;           // default min(8192, KV capacity)
  std::optional<double> tokens_per_s;              // decode tokens/s of a lone sequence
  // vLLM's gpu_memory_utilization the planner sizes the blocks with (default 0.9).
  std::optional<double> gpu_memory_utilization;
  // The simulated GPU is one of a tensor-parallel group of this size: the plan's per-GPU share.
  uint32_t tensor_parallel_size = 1;
  // Size the engine with the jitter of this seed (sim_jitter.hpp); unset: the plan exactly.
  std::optional<uint64_t> jitter_seed;
  std::optional<uint64_t> weights_bytes;
  std::optional<uint64_t> kv_bytes_per_block;
  std::optional<uint64_t> activation_bytes_per_token;
  bool enforce_eager = false;              // no CUDA graphs (vLLM --enforce-eager)
  std::vector<uint32_t> cuda_graph_sizes;  // capture sizes; empty: vLLM's for max_num_seqs
  // Memory of one graph; default: the estimate's (or 512 MiB's) pool over its graph count.
  std::optional<uint64_t> cuda_graph_bytes_per_graph;
  std::string live_state_path;
  bool kv_on_demand = false;
  bool no_metrics = false;  // GET /metrics answers 404
  std::string api_key;      // see SimConfig::api_key
  std::string cors_origin;  // see SimConfig::cors_origin
  bool reject_token_prompts = false;
  std::string dcgm_hostname;  // see SimConfig::dcgm_hostname
  std::string fault_kind;     // empty = none
  double fault_rate = 0.0;
  uint64_t fault_seed = 1;
};

// Builds a SimConfig from command-line flags: the GPU from the catalog gives total_bytes; sizes
// come from the planner's vLLM estimate when the model is known (see sim_sizing.hpp), else
// placeholders; explicit flags win. Usage/not_found errors for bad values.
Expected<SimConfig> sim_config_from_flags(const SimFlags& flags);

}  // namespace kvprof::sim
