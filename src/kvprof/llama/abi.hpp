// The part of llama.cpp's C API (llama.h) that kvprof calls, declared here because libllama is
// loaded with dlopen and never linked. Structs passed by value must match the library's layout
// byte for byte; llama.cpp changes them between versions, so LlamaLib (library.hpp) checks the
// defaults the library returns against the values expected at these offsets before any call
// that takes them, and refuses a library whose layout differs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvprof::llama::abi {

// llama_model_params of llama.cpp 0.5.x (node-llama-cpp 3.22.x): load_mode and lazy_mode
// replaced the use_mmap/use_mlock/use_direct_io booleans.
struct ModelParams {
  void* devices;                      // NULL-terminated ggml_backend_dev_t list; null = all
  const void* tensor_buft_overrides;  // NULL-terminated override list
  int32_t n_gpu_layers;               // -1 = all layers
  int32_t split_mode;                 // 0 none, 1 layer, 2 row, 3 tensor
  int32_t load_mode;                  // -1 auto, 0 none, 1 mmap, 2 mlock, 3 mmap+mlock, 4 dio
  int32_t lazy_mode;
  int32_t main_gpu;
  const float* tensor_split;
  bool (*progress_callback)(float progress, void* user_data);
  void* progress_callback_user_data;
  const void* kv_overrides;
  bool vocab_only;
  bool check_tensors;
  bool use_extra_bufts;
  bool no_host;
  bool no_alloc;
  bool load_mtp;
};
static_assert(sizeof(ModelParams) == 80);
static_assert(offsetof(ModelParams, n_gpu_layers) == 16);
static_assert(offsetof(ModelParams, tensor_split) == 40);
static_assert(offsetof(ModelParams, vocab_only) == 72);

// llama_context_params of llama.cpp 0.5.x.
struct ContextParams {
  uint32_t n_ctx;      // 0 = from the model
  uint32_t n_batch;    // logical batch: most tokens one llama_decode takes
  uint32_t n_ubatch;   // physical batch
  uint32_t n_seq_max;  // sequences (slots)
  uint32_t n_rs_seq;
  uint32_t n_outputs_max;
  uint32_t n_outputs_max_per_seq;
  int32_t n_threads;
  int32_t n_threads_batch;
  int32_t ctx_type;
  int32_t rope_scaling_type;
  int32_t pooling_type;
  int32_t attention_type;
  int32_t flash_attn_type;  // -1 auto, 0 disabled, 1 enabled
  float rope_freq_base;
  float rope_freq_scale;
  float yarn_ext_factor;
  float yarn_attn_factor;
  float yarn_beta_fast;
  float yarn_beta_slow;
  uint32_t yarn_orig_ctx;
  float defrag_thold;
  void* cb_eval;
  void* cb_eval_user_data;
  int32_t type_k;  // ggml_type of the K cache
  int32_t type_v;  // ggml_type of the V cache
  bool (*abort_callback)(void* data);
  void* abort_callback_data;
  bool embeddings;
  bool offload_kqv;
  bool no_perf;
  bool op_offload;
  bool swa_full;
  bool kv_unified;
  void* samplers;
  size_t n_samplers;
  void* ctx_other;
};
static_assert(sizeof(ContextParams) == 160);
static_assert(offsetof(ContextParams, n_threads) == 28);
static_assert(offsetof(ContextParams, flash_attn_type) == 52);
static_assert(offsetof(ContextParams, type_k) == 104);
static_assert(offsetof(ContextParams, embeddings) == 128);

// llama_model_tensor_buft_override: tensors whose name matches `pattern` (std::regex_search) go
// to buffer type `buft`; the list ends with a null pattern.
struct TensorBuftOverride {
  const char* pattern;
  void* buft;  // ggml_backend_buffer_type_t
};

// llama_batch (stable across versions).
struct Batch {
  int32_t n_tokens;
  int32_t* token;
  float* embd;
  int32_t* pos;
  int32_t* n_seq_id;
  int32_t** seq_id;
  int8_t* logits;
};
static_assert(sizeof(Batch) == 56);

// llama_perf_context_data.
struct PerfContextData {
  double t_start_ms;
  double t_load_ms;
  double t_p_eval_ms;  // prompt processing
  double t_eval_ms;    // generation
  int32_t n_p_eval;
  int32_t n_eval;
  int32_t n_reused;
};

// ggml_log_level.
enum LogLevel : int32_t {
  log_none = 0,
  log_debug = 1,
  log_info = 2,
  log_warn = 3,
  log_error = 4,
  log_cont = 5
};

using LogCallback = void (*)(int32_t level, const char* text, void* user_data);

// llama_chat_message.
struct ChatMessage {
  const char* role;
  const char* content;
};

struct Model;
struct Context;
struct Vocab;
struct Memory;
struct BackendDevice;

// Entry points, in the order LlamaLib resolves them.
struct Functions {
  // libllama
  void (*backend_init)();
  void (*log_set)(LogCallback callback, void* user_data);
  const char* (*print_system_info)();
  const char* (*version)();  // optional: llama.cpp >= 0.5
  ModelParams (*model_default_params)();
  ContextParams (*context_default_params)();
  Model* (*model_load_from_file)(const char* path, ModelParams params);
  void (*model_free)(Model* model);
  Context* (*init_from_model)(Model* model, ContextParams params);
  void (*free)(Context* ctx);
  const Vocab* (*model_get_vocab)(const Model* model);
  int32_t (*vocab_n_tokens)(const Vocab* vocab);
  int32_t (*model_n_layer)(const Model* model);
  int32_t (*model_n_embd)(const Model* model);
  int32_t (*model_n_ctx_train)(const Model* model);
  uint64_t (*model_size)(const Model* model);
  uint64_t (*model_n_params)(const Model* model);
  int32_t (*model_desc)(const Model* model, char* buf, size_t buf_size);
  uint32_t (*n_ctx)(const Context* ctx);
  uint32_t (*n_batch)(const Context* ctx);
  uint32_t (*n_ubatch)(const Context* ctx);
  uint32_t (*n_seq_max)(const Context* ctx);
  Batch (*batch_init)(int32_t n_tokens, int32_t embd, int32_t n_seq_max);
  void (*batch_free)(Batch batch);
  int32_t (*decode)(Context* ctx, Batch batch);
  float* (*get_logits_ith)(Context* ctx, int32_t i);
  Memory* (*get_memory)(const Context* ctx);
  void (*memory_clear)(Memory* mem, bool data);
  bool (*memory_seq_rm)(Memory* mem, int32_t seq_id, int32_t p0, int32_t p1);
  PerfContextData (*perf_context)(const Context* ctx);
  void (*perf_context_reset)(Context* ctx);
  int32_t (*tokenize)(const Vocab* vocab, const char* text, int32_t text_len, int32_t* tokens,
                      int32_t n_tokens_max, bool add_special, bool parse_special);
  int32_t (*token_to_piece)(const Vocab* vocab, int32_t token, char* buf, int32_t length,
                            int32_t lstrip, bool special);
  bool (*vocab_is_eog)(const Vocab* vocab, int32_t token);
  // Chat templates (optional: a library without them serves chat as a plain join).
  // llama_model_chat_template: the GGUF's tokenizer.chat_template (name null), or null.
  const char* (*model_chat_template)(const Model* model, const char* name);
  // llama_chat_apply_template: the formatted chat's length (written into buf up to `length`),
  // negative when the template is not one llama.cpp knows.
  int32_t (*chat_apply_template)(const char* tmpl, const ChatMessage* chat, size_t n_msg,
                                 bool add_ass, char* buf, int32_t length);
  // llama_chat_builtin_templates: the number of built-in template names (up to `len` written).
  int32_t (*chat_builtin_templates)(const char** output, size_t len);
  // libggml / libggml-base
  void (*backend_load_all_from_path)(const char* dir_path);
  size_t (*backend_dev_count)();
  BackendDevice* (*backend_dev_get)(size_t index);
  const char* (*backend_dev_name)(BackendDevice* device);
  const char* (*backend_dev_description)(BackendDevice* device);
  void (*backend_dev_memory)(BackendDevice* device, size_t* free, size_t* total);
  int32_t (*backend_dev_type)(BackendDevice* device);  // 0 CPU, 1 GPU, others: iGPU/accelerator
  void* (*backend_dev_buffer_type)(BackendDevice* device);  // the device's ggml buffer type
};

}  // namespace kvprof::llama::abi
