// ModelSpec: everything kvprof knows about a model's architecture and checkpoint, whichever
// source it came from (catalog entry, HF config.json, model folder with safetensors, GGUF).
// Field names follow the field's usual names (n_layer, n_head_kv, head_dim, ...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvprof/model/dtype.hpp"

namespace kvprof::model {

// How a decoder layer keeps context for a request.
enum class AttentionKind : uint8_t {
  full,     // standard (MHA/GQA/MQA) attention over the whole context
  sliding,  // attention over the last `window_tokens` tokens (Mistral v0.1, Gemma 2/3 local,
            // gpt-oss)
  chunked,  // chunked local attention over blocks of `window_tokens` (Llama 4 iRoPE layers)
  mla,     // multi-head latent attention (DeepSeek V2/V3, Kimi): one latent + rope vector per token
  linear,  // linear attention / gated delta net (Qwen3-Next): constant state per request
  mamba,   // Mamba / Mamba-2 SSM mixer (Jamba, Granite 4, Nemotron-H): constant state per request
};

struct LayerSpec {
  AttentionKind attention = AttentionKind::full;
  bool moe = false;            // the layer's MLP is a mixture of experts (else dense)
  uint32_t window_tokens = 0;  // window for sliding / chunked layers, 0 otherwise
  bool indexer = false;        // DSA: the layer runs its own indexer and keeps its key cache
  // Per-layer attention and MLP widths where they differ from the model's (Gemma 4's full layers:
  // head_dim 512, fewer KV heads); 0 = the model's.
  uint32_t head_dim = 0;
  uint32_t n_head_kv = 0;
  uint32_t intermediate_size = 0;
  bool kv_shared = false;  // reads an earlier layer's cache and keeps none (Gemma 4's last layers)
};

// Multi-head latent attention dimensions (DeepSeek V2/V3 config names).
struct MlaSpec {
  uint32_t q_lora_rank = 0;  // 0 = queries projected directly (V2-Lite)
  uint32_t kv_lora_rank = 0;
  uint32_t qk_nope_head_dim = 0;
  uint32_t qk_rope_head_dim = 0;
  uint32_t v_head_dim = 0;
  [[nodiscard]] bool enabled() const { return kv_lora_rank > 0; }
};

// DeepSeek sparse attention (DeepSeek-V3.2, GLM-5): a "lightning indexer" picks the index_topk
// tokens each query attends to in the MLA cache, and keeps a key cache of its own.
struct DsaSpec {
  uint32_t index_n_heads = 0;
  uint32_t index_head_dim = 0;
  uint32_t index_topk = 0;
  [[nodiscard]] bool enabled() const { return index_topk > 0; }
};

// Mixture-of-experts dimensions; n_expert == 0 means a dense model.
struct MoeSpec {
  uint32_t n_expert = 0;                         // routed experts per MoE layer
  uint32_t n_expert_used = 0;                    // experts each token is routed to
  uint32_t expert_intermediate_size = 0;         // per routed expert
  uint32_t n_shared_expert = 0;                  // always-on experts (DeepSeek, Llama 4, Qwen MoE)
  uint32_t shared_expert_intermediate_size = 0;  // per shared expert
  bool shared_expert_gate = false;  // Qwen2-MoE style sigmoid gate on the shared expert
  bool router_bias = false;         // router has a bias vector (gpt-oss)
  bool expert_bias = false;         // expert projections have biases (gpt-oss)
};

// State-space / linear-attention mixer dimensions (per layer, before tensor parallelism).
struct SsmSpec {
  enum class Kind : uint8_t { none, mamba1, mamba2, gated_delta_net };
  Kind kind = Kind::none;
  uint32_t d_inner = 0;     // mamba: expand * hidden_size; GDN: n_heads * head_dim
  uint32_t d_state = 0;     // mamba state size (per channel for mamba1, per head dim for mamba2)
  uint32_t d_conv = 0;      // causal conv kernel width
  uint32_t n_groups = 0;    // mamba2 B/C groups
  uint32_t n_heads = 0;     // mamba2 heads / GDN value heads
  uint32_t head_dim = 0;    // mamba2 head dim / GDN value head dim
  uint32_t n_k_heads = 0;   // GDN key heads
  uint32_t k_head_dim = 0;  // GDN key head dim
  uint32_t dt_rank = 0;     // mamba1 dt projection rank
};

enum class QuantMethod : uint8_t {
  none,
  fp8,  // fp8 weights (checkpoint "fp8" or runtime --quantization fp8), per-tensor/channel or block
        // scales
  awq,  // 4-bit, group scales + zeros
  gptq,                // 4/8-bit, group scales (+ zeros), optional act-order g_idx
  compressed_tensors,  // llm-compressor: w8a8 int8/fp8, w4a16, fp8-dynamic
  bitsandbytes,        // nf4 / int8
  mxfp4,               // gpt-oss experts: fp4 e2m1 + e8m0 scales per 32
  nvfp4,               // fp4 e2m1 + fp8 scales per 16
  gguf,                // ggml block quants; exact bytes come from the tensor list
};

struct Quantization {
  QuantMethod method = QuantMethod::none;
  uint32_t weight_bits = 16;      // bits per quantized weight element
  int32_t group_size = -1;        // elements per scale group along the input dim; -1 = per channel
  bool zero_point = false;        // asymmetric: a zero per group (AWQ, GPTQ sym=false)
  bool act_order = false;         // GPTQ desc_act: a g_idx vector per linear layer
  uint32_t activation_bits = 16;  // 8 for w8a8 (int8 or fp8 activations)
  bool weight_float = false;      // quantized weights are floating point (fp8/fp4), else integer
  uint32_t block_rows = 0;        // fp8 block-scale shape (e.g. 128x128); 0 = not block-wise
  uint32_t block_cols = 0;
  std::vector<std::string> ignored_modules;  // modules left unquantized ("lm_head", "re:.*gate$")
  bool from_checkpoint = true;  // false when the engine quantizes at load (--quantization fp8)
  DType kv_cache_dtype_hint = DType::bf16;  // checkpoint's kv_cache_scheme (fp8) when present
  bool has_kv_cache_scheme = false;
  std::string format;  // free text as the config said it ("w4a16", "float-quantized", ...)
};

// One tensor as a checkpoint file declares it (safetensors header or GGUF tensor info).
struct TensorInfo {
  std::string name;
  std::string type_name;        // as the file names it: "BF16", "F8_E4M3", "Q4_K", ...
  std::vector<uint64_t> shape;  // as declared (GGUF: ne[0] first)
  uint64_t bytes = 0;           // exact bytes of the data in the file
  uint64_t offset_bytes = 0;    // GGUF: where the data starts, from the start of the data section
};

struct ModelSpec {
  // Identity.
  std::string id;            // HF id, catalog id, or the path it was read from
  std::string architecture;  // e.g. "LlamaForCausalLM" (HF) or "llama" (GGUF)
  std::string model_type;    // HF model_type of the text model, e.g. "llama", "qwen2", "gemma2"
  std::string source;        // where the facts came from (catalog citation, file path)
  enum class Origin : uint8_t { catalog, hf_config, safetensors, gguf };
  Origin origin = Origin::catalog;

  // Text model dimensions (HF names in comments).
  uint32_t n_layer = 0;            // num_hidden_layers
  uint32_t hidden_size = 0;        // hidden_size
  uint32_t intermediate_size = 0;  // intermediate_size of dense MLPs
  uint32_t n_head = 0;             // num_attention_heads
  uint32_t n_head_kv = 0;          // num_key_value_heads (== n_head for MHA)
  uint32_t head_dim = 0;           // explicit head_dim, else hidden_size / n_head
  uint32_t vocab_size = 0;
  uint64_t max_position_embeddings = 0;
  uint32_t rotary_dim = 0;  // head_dim * partial_rotary_factor; 0 = no rotary (learned/NoPE)
  bool tie_word_embeddings = false;
  bool learned_positions = false;  // absolute position embedding table (GPT-2, OPT)

  // Per-layer structure details used to count parameters exactly.
  uint32_t mlp_matrices = 3;        // 3 = gated (gate, up, down); 2 = fc1/fc2
  bool attention_bias = false;      // q/k/v projections have biases (Qwen2, Phi-2)
  bool o_bias = false;              // output projection has a bias
  bool mlp_bias = false;            // dense MLP projections have biases
  bool layer_norm_bias = false;     // norms are LayerNorm with bias (else RMSNorm weight only)
  uint32_t norms_per_layer = 2;     // Gemma 2/3 have 4 (pre/post attention and MLP)
  bool qk_norm = false;             // per-head q/k RMSNorm (Qwen3, Gemma 3)
  bool attn_output_gate = false;    // gated attention output (Qwen3-Next): q projection doubled
  bool parallel_attn_mlp = false;   // attention and MLP share one input norm (Phi-2, GPT-J)
  bool moe_with_dense_mlp = false;  // MoE layers also run a dense MLP (Gemma 4 26B-A4B)
  // Per-layer embeddings (Gemma 4 E2B/E4B): a table of n_layer x per_layer_input_size values per
  // token of per_layer_vocab_size, projected into each layer; 0 = none.
  uint32_t per_layer_input_size = 0;
  uint32_t per_layer_vocab_size = 0;

  std::vector<LayerSpec> layers;  // one per decoder layer, size n_layer
  MlaSpec mla;
  DsaSpec dsa;
  MoeSpec moe;
  SsmSpec ssm;
  uint32_t n_mtp_layers = 0;  // multi-token-prediction layers in the checkpoint (DeepSeek V3)

  // Parameters outside the text decoder (vision tower, projector, audio encoder), not counted
  // by the decoder formulas. Taken from the catalog or estimated from vision_config.
  uint64_t extra_params = 0;
  // The vision tower's depth and width as its vision_config states them (SGLang lowers its
  // static memory fraction by them); 0 without a vision_config.
  uint32_t vision_layers = 0;
  uint32_t vision_hidden_size = 0;

  // Checkpoint.
  DType dtype = DType::bf16;  // torch_dtype / dtype of unquantized weights
  Quantization quant;
  std::vector<TensorInfo> tensors;  // exact tensors when read from files; empty otherwise
  uint64_t published_params = 0;    // parameter count the publisher states (display/cross-check)

  // Why some field was guessed; a non-empty list marks the estimate lower confidence.
  std::vector<std::string> warnings;

  [[nodiscard]] bool is_moe() const { return moe.n_expert > 0; }
  // Layer i's head dim, KV heads and dense MLP width (its own where set, else the model's).
  [[nodiscard]] uint32_t layer_head_dim(size_t i) const {
    return i < layers.size() && layers[i].head_dim > 0 ? layers[i].head_dim : head_dim;
  }
  [[nodiscard]] uint32_t layer_n_head_kv(size_t i) const {
    return i < layers.size() && layers[i].n_head_kv > 0 ? layers[i].n_head_kv : n_head_kv;
  }
  [[nodiscard]] uint32_t layer_intermediate_size(size_t i) const {
    return i < layers.size() && layers[i].intermediate_size > 0 ? layers[i].intermediate_size
                                                                : intermediate_size;
  }
  [[nodiscard]] uint32_t count_layers(AttentionKind kind) const {
    uint32_t n = 0;
    for (const auto& l : layers)
      n += l.attention == kind ? 1 : 0;
    return n;
  }
};

}  // namespace kvprof::model
