// A model and a context of a loaded libllama, owned (freed on destruction), with the settings
// llama-server users know (-c -np -b -ub -fa -ctk -ctv -ngl -t), and the batched decode steps
// kvprof's bench drives: prefill of several sequences at once, then one token per sequence.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvprof/llama/library.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::llama {

// How the error of llama_decode's status 1 (no free KV cells for the batch) begins, so that
// callers that run the engine at its limit (find-max) can tell it from other failures.
inline constexpr std::string_view k_no_kv_room = "llama_decode found no room in the KV cache";

enum class FlashAttn : int8_t { auto_ = -1, off = 0, on = 1 };

// Parses llama.cpp's -fa value: on|off|auto (and 1/0, true/false); usage error otherwise.
Expected<FlashAttn> parse_flash_attn(const std::string& value);
// "on", "off" or "auto".
const char* flash_attn_name(FlashAttn fa);

// Settings of one engine instance, named after llama.cpp's flags.
struct LlamaSettings {
  std::string model_path;
  int32_t n_gpu_layers = -1;                // -ngl; -1 = all
  bool use_mmap = true;                     // --no-mmap turns it off
  uint32_t n_ctx = 4096;                    // -c: KV cells of the whole context (all sequences)
  uint32_t n_seq_max = 1;                   // -np: sequences (slots)
  uint32_t n_batch = 2048;                  // -b
  uint32_t n_ubatch = 512;                  // -ub
  FlashAttn flash_attn = FlashAttn::auto_;  // -fa
  std::string cache_type_k = "f16";         // -ctk
  std::string cache_type_v = "f16";         // -ctv
  int32_t n_threads = 0;                    // -t; 0 = the machine's cores
  bool kv_unified = true;                   // one KV buffer shared by every sequence
  bool swa_full = false;  // --swa-full: sliding-window layers keep all n_ctx cells (llama-server's
                          // default is off)
  // -ot/--cpu-moe: tensors whose GGUF name matches a pattern go to that buffer type ("CPU",
  // "CUDA0"), the first match deciding, before -ngl places the rest.
  std::vector<std::pair<std::string, std::string>> tensor_overrides;
  // Outputs one decode may have (n_outputs_max, one per sequence): llama-server's -np, which
  // sizes the reserved graph's logits; 0 keeps libllama's default (n_batch).
  uint32_t n_outputs_max = 0;
};

// The model as llama.cpp describes it after loading.
struct LlamaModelFacts {
  std::string description;  // llama_model_desc: "llama 1B F16"
  uint64_t size_bytes = 0;  // llama_model_size: bytes of all tensors
  uint64_t n_params = 0;
  int32_t n_layer = 0;
  int32_t n_embd = 0;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;
};

class LlamaModel {
 public:
  // Loads a GGUF; input error with llama.cpp's last log lines when it refuses the file.
  static Expected<std::unique_ptr<LlamaModel>> load(std::shared_ptr<LlamaLib> lib,
                                                    const LlamaSettings& settings);
  ~LlamaModel();
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  [[nodiscard]] const LlamaModelFacts& facts() const { return m_facts; }
  [[nodiscard]] abi::Model* raw() const { return m_model; }
  [[nodiscard]] LlamaLib& lib() const { return *m_lib; }
  [[nodiscard]] const abi::Vocab* vocab() const { return m_vocab; }

  // The tokens of `text` (llama_tokenize; BOS added when `add_special` and the vocabulary wants
  // it); input error when the vocabulary cannot tokenize it.
  [[nodiscard]] Expected<std::vector<int32_t>> tokenize(std::string_view text,
                                                        bool add_special) const;
  // The text of one token (special tokens rendered); empty for an id out of range.
  [[nodiscard]] std::string token_piece(int32_t token) const;
  // Whether `token` ends generation (EOS, EOT, ...).
  [[nodiscard]] bool is_eog(int32_t token) const;

 private:
  LlamaModel() = default;
  std::shared_ptr<LlamaLib> m_lib;
  abi::Model* m_model = nullptr;
  const abi::Vocab* m_vocab = nullptr;
  LlamaModelFacts m_facts;
};

// llama.cpp's timings of a context (llama_perf_context).
struct LlamaPerf {
  double prompt_ms = 0;
  double eval_ms = 0;
  int32_t prompt_tokens = 0;
  int32_t eval_tokens = 0;
};

class LlamaContext {
 public:
  // Creates a context (allocates the KV cache and reserves the compute buffers); usage error
  // for a bad cache type, driver error with llama.cpp's last log lines when it fails (e.g. the
  // KV cache does not fit in memory).
  static Expected<std::unique_ptr<LlamaContext>> create(LlamaModel& model,
                                                        const LlamaSettings& settings);
  ~LlamaContext();
  LlamaContext(const LlamaContext&) = delete;
  LlamaContext& operator=(const LlamaContext&) = delete;

  [[nodiscard]] abi::Context* raw() const { return m_ctx; }
  [[nodiscard]] uint32_t n_ctx() const;
  [[nodiscard]] uint32_t n_batch() const;
  [[nodiscard]] uint32_t n_ubatch() const;
  [[nodiscard]] uint32_t n_seq_max() const;

  // Forgets every sequence (the KV cache keeps its memory).
  void clear();

  // Per sequence of a prefill: the greedy next token and when its prompt was done.
  struct PrefillResult {
    std::vector<int32_t> next_tokens;
    std::vector<int64_t> done_mono_ns;
  };

  // Prefills sequences 0..prompts.size()-1 with their prompt tokens (sequence after sequence,
  // in logical batches of n_batch tokens, as llama-server does). Driver error when llama_decode
  // fails (status 1: no room left in the KV cache), interrupted when `stop` returns true
  // between batches.
  Expected<PrefillResult> prefill(const std::vector<std::vector<int32_t>>& prompts,
                                  const std::function<bool()>& stop = {});

  // Decodes one token for each active sequence (seq ids and their next positions) and returns
  // each one's greedy next token.
  Expected<std::vector<int32_t>> step(const std::vector<int32_t>& seq_ids,
                                      const std::vector<int32_t>& tokens,
                                      const std::vector<int32_t>& positions);

  // One token of a mixed batch: sequence, position, and whether its logits are wanted.
  struct BatchToken {
    int32_t token = 0;
    int32_t pos = 0;
    int32_t seq_id = 0;
    bool logits = false;
  };

  // Decodes `tokens` (at most n_batch) in one llama_decode and returns the greedy next token of
  // each entry that asked for logits, in order. Driver error when llama_decode fails.
  Expected<std::vector<int32_t>> decode_greedy(std::span<const BatchToken> tokens);

  // Forgets every cell of sequence `seq_id` (its KV cache is free for others).
  void remove_sequence(int32_t seq_id);

  // llama.cpp's own timings since the last reset_perf().
  [[nodiscard]] LlamaPerf perf() const;
  void reset_perf();

 private:
  LlamaContext() = default;
  Expected<void> decode(int32_t n_tokens);
  [[nodiscard]] int32_t argmax(int32_t batch_index) const;

  LlamaModel* m_model = nullptr;
  abi::Context* m_ctx = nullptr;
  abi::Batch m_batch{};
  int32_t m_batch_capacity = 0;
  int32_t m_n_vocab = 0;
};

}  // namespace kvprof::llama
