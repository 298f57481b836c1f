// What an estimate is asked about: the engine and its settings (named like the engines' own
// flags), the parallelism, and the workload grid.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/engines/engine.hpp"
#include "kvprof/model/dtype.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::estimate {

// KV cache element type: auto = the model dtype.
enum class KvCacheDtype : uint8_t { auto_, f16, bf16, f32, fp8_e4m3, fp8_e5m2, q8_0, q4_0 };

// Parses vLLM/SGLang/llama.cpp spellings: auto, fp16, bf16, fp8, fp8_e4m3, fp8_e5m2, q8_0, q4_0.
Expected<KvCacheDtype> parse_kv_cache_dtype(std::string_view text);
std::string_view kv_cache_dtype_name(KvCacheDtype t);

// Engine settings. Unset optionals take the engine's own default for the model and GPU.
// llama.cpp's -ot PATTERN=BUFFER_TYPE: tensors whose GGUF name contains a match of `pattern` (a
// regular expression) go to `buffer_type` ("CPU", "CUDA0", ...).
struct TensorOverride {
  std::string pattern;
  std::string buffer_type;
};

struct EngineSettings {
  engines::Engine engine = engines::Engine::vllm;
  uint32_t tensor_parallel_size = 1;
  uint32_t pipeline_parallel_size = 1;
  uint32_t data_parallel_size = 1;
  // Whole experts per GPU: vLLM --enable-expert-parallel over tp x dp ranks; SGLang
  // --enable-ep-moe and the deepep/mooncake all-to-all backends over its tp GPUs.
  bool enable_expert_parallel = false;
  // SGLang --enable-dp-attention (TensorRT-LLM enable_attention_dp): the dp attention replicas
  // live inside the tp GPUs, each with tp / dp of them and a KV pool of its own.
  bool enable_dp_attention = false;
  uint32_t expert_parallel_size = 1;             // SGLang --ep-size: whole experts over these ranks
  std::optional<uint32_t> moe_dense_tp_size;     // SGLang: dense MLPs' TP width (default tp)
  bool enable_dp_lm_head = false;                // SGLang: the LM head over the attention's ranks
  std::optional<double> gpu_memory_utilization;  // vLLM (0.9); SGLang mem_fraction_static;
                                                 // TRT-LLM free_gpu_memory_fraction
  std::optional<uint64_t> max_model_len;         // default: the model's max_position_embeddings
  std::optional<uint64_t> max_input_tokens;      // TGI --max-input-tokens (default: its release's)
  std::optional<uint32_t> max_num_seqs;
  std::optional<uint32_t> max_num_batched_tokens;
  std::optional<uint32_t> block_size;
  std::optional<model::DType> dtype;  // --dtype override (auto = checkpoint dtype)
  std::string quantization;           // --quantization (runtime or checkpoint method)
  KvCacheDtype kv_cache_dtype = KvCacheDtype::auto_;
  bool enforce_eager = false;
  std::optional<uint64_t> kv_cache_memory_bytes;  // vLLM --kv-cache-memory
  // vLLM's host memory: --cpu-offload-gb (weights per GPU moved to pinned host memory),
  // --swap-space (V0's CPU blocks, 4 GiB when unset), --kv-offloading-size (a host KV cache, the
  // size summed over the TP ranks); --kv-transfer-config names a KV connector (its JSON).
  std::optional<uint64_t> cpu_offload_bytes;
  std::optional<uint64_t> swap_space_bytes;
  std::optional<uint64_t> kv_offloading_bytes;
  std::string kv_transfer_config;
  std::optional<uint32_t> num_gpu_blocks_override;
  std::string engine_version;  // release whose rules apply ("0.7", "v0.10.1"; "" = latest)
  std::optional<uint32_t> cuda_graph_max_bs;  // SGLang --cuda-graph-max-bs
  // llama.cpp
  std::optional<uint32_t> n_gpu_layers;  // -ngl (default: all)
  std::vector<double> tensor_split;      // -ts: each GPU's share of the layers (empty: one GPU)
  uint32_t n_devices = 0;  // -dev with several GPUs: how many (split evenly unless -ts says)
  // -ot, --cpu-moe, --n-cpu-moe: in the order given, the first match wins.
  std::vector<TensorOverride> tensor_overrides;
  bool flash_attn = true;       // -fa
  bool flash_attn_auto = true;  // -fa auto or none: the release's default decides
  // One output per slot in the reserved graph, as llama-server (from b9460) and kvprof serve do;
  // false: libllama's default of every token (kvprof bench).
  bool llamacpp_outputs_per_slot = true;
  uint64_t ollama_gpu_overhead_bytes = 0;  // OLLAMA_GPU_OVERHEAD: VRAM Ollama keeps free per GPU
  uint32_t n_parallel = 1;                 // -np slots
  bool n_parallel_given = false;           // -np stated (Ollama picks its own otherwise)
  uint32_t n_ubatch = 512;
  uint32_t n_batch = 2048;   // -b
  std::string cache_type_k;  // -ctk (llama.cpp names); "" = --kv-cache-dtype or f16
  std::string cache_type_v;  // -ctv
  bool use_mmap = true;      // --no-mmap
  bool swa_full = false;     // --swa-full
  bool op_offload = true;    // llama.cpp: --no-op-offload turns it off (b5346+)
  bool kv_unified = true;    // --kv-unified (one KV stream for all slots)
  // --fit (llama-server's default from b7407): the context, layers and experts not given, fitted
  // to leave --fit-target free; unset = off in `estimate`, the release's default for a command.
  std::optional<bool> fit;
  uint64_t fit_target_bytes = 1ULL << 30;  // --fit-target (MiB on the command line)
  uint32_t fit_ctx = 4096;                 // --fit-ctx: the context is not lowered below it
  bool ctx_of_model = false;  // -c 0, or no -c where the release starts with the model's context
  bool no_gpu = false;        // --gpu cpu: a CPU-only deployment
  std::optional<uint64_t> host_memory_bytes;  // --host-mem (default: this machine's RAM)
  // Speculative decoding (seed 000): a draft model and extra CUDA graph sets.
  std::string speculative_model;  // catalog id / path of the draft model ("" = none)
  uint32_t num_speculative_tokens = 0;
  bool spec_runtime_control = false;  // draft length switched at runtime: graphs for 0 and k
};

// True for an SGLang --moe-a2a-backend that puts whole experts on each of the tp GPUs (deepep,
// mooncake: "only support cases where ep_size = tp_size").
bool moe_backend_splits_experts(std::string_view backend);

// The workload: each (context, concurrency) pair is one row of the result.
struct Workload {
  std::vector<uint64_t> context_tokens;  // tokens per request (prompt + output)
  std::vector<uint32_t> concurrency;     // requests in flight
};

}  // namespace kvprof::estimate
