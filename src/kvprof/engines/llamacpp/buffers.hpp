// Where llama.cpp puts each buffer and how big it is, the way libllama sizes them: model weights
// per device (token embeddings and layers that are not offloaded stay on the host; mapped,
// read or repacked), the KV cache per device, the compute buffers of the worst-case graph, the
// output buffer, and the host RAM the process needs. Exact for weights and KV; the CPU compute
// buffer is exact too for the architectures with a node-by-node graph (graph.hpp),
// ggml's allocator replayed over it; elsewhere (other architectures, offloaded layers) it
// follows the largest stage of the graph (logits, attention scores, MLP).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/engines/llamacpp/releases.hpp"
#include "kvprof/estimate/settings.hpp"
#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::engines {

// ggml type ids of llama.cpp's cache types (-ctk / -ctv).
inline constexpr uint32_t k_ggml_type_f32 = 0;
inline constexpr uint32_t k_ggml_type_f16 = 1;

// The settings of llama.cpp that decide its memory, with llama-server's defaults.
struct LlamaCppSettings {
  uint32_t n_ctx = 4096;              // -c: KV cells of the whole context
  uint32_t n_seq_max = 1;             // -np: sequences (slots)
  uint32_t n_batch = 2048;            // -b
  uint32_t n_ubatch = 512;            // -ub
  bool flash_attn = true;             // -fa (auto turns it on where the backend supports it)
  uint32_t type_k = k_ggml_type_f16;  // -ctk, as a ggml type id
  uint32_t type_v = k_ggml_type_f16;  // -ctv
  int32_t n_gpu_layers = -1;          // -ngl; -1 = all; with no GPU nothing is offloaded
  bool has_gpu = false;               // a GPU backend is present (CUDA build on a GPU machine)
  bool use_mmap = true;               // --no-mmap reads the file instead
  bool swa_full = false;              // --swa-full
  // For batches of 32 tokens or more the CUDA backend runs the products of weights kept in host
  // memory, copying each weight into the first GPU's compute buffer (op offload, ggml's
  // scheduler); --no-op-offload (b5346+) keeps them on the CPU.
  bool op_offload = true;
  bool kv_unified = true;  // one KV stream shared by all sequences
  bool cpu_repack = true;  // the CPU backend repacks Q4_0 / Q4_K / IQ4_NL matrices (x86 AVX2+)
  // -ts: each GPU's share of the offloaded layers (3,1 = three quarters on the first); empty
  // or one entry: one GPU. All zero: an even split (llama.cpp splits by free memory; the GPUs
  // here are alike).
  std::vector<double> tensor_split;
  // -ot / --cpu-moe / --n-cpu-moe: tensors placed by name before -ngl decides (first match).
  std::vector<estimate::TensorOverride> tensor_overrides;
  // The release whose rules apply (releases.hpp): padding, streams, the reserved graph.
  const LlamaCppReleaseRules* release = &llamacpp_latest_release();
  // The program limits the graph to one output per slot (n_outputs_max = -np), as llama-server
  // does on releases that have the limit, and kvprof serve; false keeps libllama's default of
  // every token of the ubatch (kvprof bench, node-llama-cpp).
  bool outputs_per_slot = false;
};

// One GPU's buffers when layers are split over several (-ts).
struct LlamaCppDevice {
  uint32_t layers = 0;  // repeating layers it holds
  bool output = false;  // it holds the output layer
  uint64_t model_bytes = 0;
  uint64_t kv_bytes = 0;
  uint64_t compute_bytes = 0;
  [[nodiscard]] uint64_t total_bytes() const { return model_bytes + kv_bytes + compute_bytes; }
};

// Bytes of one buffer kind on the host and on the GPU (all offloaded layers on one device).
struct LlamaCppBuffer {
  uint64_t host_bytes = 0;
  uint64_t gpu_bytes = 0;
};

struct LlamaCppPlan {
  uint64_t overridden_host_bytes = 0;  // weights an override put on the host (-ot =CPU, --cpu-moe)
  // What llama.cpp logs (at debug level, llama-server -v) for each tensor an override placed:
  // "tensor blk.0.ffn_up_exps.weight (6 MiB f16) buffer type overridden to CPU".
  std::vector<std::string> override_lines;
  // Weights as llama.cpp's memory breakdown names them: CPU_Mapped (the span of the file the
  // host tensors lie in), CPU (read into memory with --no-mmap), CPU_REPACK, and the GPU's.
  uint64_t model_mapped_bytes = 0;
  uint64_t model_host_bytes = 0;
  uint64_t model_repack_bytes = 0;
  uint64_t model_gpu_bytes = 0;
  uint64_t model_host_resident_bytes = 0;  // host weights that occupy RAM once used
  // The largest weight matrix in host memory (not repacked) that a layer's attention, its MLP
  // and the output layer multiply by: what op offload copies into the first GPU's compute buffer.
  uint64_t host_attention_matrix_bytes = 0;
  uint64_t host_ffn_matrix_bytes = 0;
  uint64_t host_output_matrix_bytes = 0;
  uint64_t op_offload_copy_bytes = 0;        // the copy at the first GPU's compute peak (0: none)
  LlamaCppBuffer kv;                         // llama_kv_cache buffers
  LlamaCppBuffer compute;                    // graph compute buffers, as allocated
  uint64_t compute_host_resident_bytes = 0;  // of the host one, what a running server touches
  uint64_t output_bytes = 0;                 // logits of n_seq_max outputs, host
  uint64_t runtime_bytes = 0;     // libllama, ggml and vocabulary tables: host, measured constant
  uint64_t host_total_bytes = 0;  // RAM the process grows by: resident weights + the host buffers
  uint64_t gpu_total_bytes = 0;   // GPU buffers of all GPUs (context, driver overhead not included)
  std::vector<LlamaCppDevice> gpus;  // per GPU, in -ts order (one entry with one GPU)
  std::vector<int32_t> layer_gpu;    // per repeating layer: its GPU, or -1 on the host

  uint32_t kv_cells = 0;           // cells of a full-attention layer (all streams)
  uint32_t kv_cells_swa = 0;       // cells of a sliding-window layer (all streams)
  uint32_t n_ctx_seq = 0;          // context of one sequence
  uint32_t n_ubatch = 0;           // tokens of the worst-case graph
  uint32_t gpu_layers = 0;         // repeating layers offloaded (to all GPUs)
  bool output_on_gpu = false;      // -ngl above the layer count also offloads the output layer
  int32_t output_gpu = -1;         // the GPU holding it
  uint64_t kv_bytes_per_cell = 0;  // full-attention layers, all devices
  uint64_t kv_k_bytes = 0;         // the attention layers' cache: its K part
  uint64_t kv_v_bytes = 0;         // and its V part (none with MLA: V is a view of K)
  std::string compute_stage;       // the stage that sized the compute buffer
};

// The plan for `m` under `s`. Weights are exact when `m` came from a GGUF (its tensor list),
// otherwise computed from the dimensions in f16. Usage error for settings llama.cpp refuses
// (a quantized V cache without flash attention, zero sizes, a -ts of no positive share).
Expected<LlamaCppPlan> plan_llamacpp(const model::ModelSpec& m, const LlamaCppSettings& s);

// The ggml type id of a llama.cpp cache type name (-ctk/-ctv: f32 f16 bf16 q8_0 q4_0 q4_1 q5_0
// q5_1 iq4_nl, any case); usage error naming the choices otherwise.
Expected<uint32_t> parse_cache_type(std::string_view name);

// llama.cpp's layer split (llama_model::load_tensors, split mode "layer"): of `n_layer` repeating
// layers the last `n_gpu_layers` go to the GPUs (the output layer counts as one more), each to
// the first GPU whose cumulative share of `split` exceeds the layer's position among the
// offloaded ones. Returns a GPU index or -1 (host) for each layer 0..n_layer, the output last.
std::vector<int32_t> llamacpp_layer_split(uint32_t n_layer, uint32_t n_gpu_layers,
                                          const std::vector<double>& split);

// Bytes of `n` elements of ggml type `type` in whole blocks; 0 for an unknown type.
uint64_t ggml_row_bytes(uint32_t type, uint64_t n);

}  // namespace kvprof::engines
