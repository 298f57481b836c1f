// ModelSpec -> a GGUF file with random ("dummy") weights that llama.cpp loads and runs: its
// tensor inventory with llama.cpp's names, shapes and ggml types, the "<arch>.*" hyperparameter
// keys the loader requires, and a synthetic tokenizer (dummy_vocab.hpp). The equivalent of
// vLLM's --load-format dummy: memory and speed of the real model, nonsense text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/model/dummy_weights.hpp"
#include "kvprof/model/gguf_mix.hpp"
#include "kvprof/model/gguf_writer.hpp"
#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::model {

// A ChatML chat template (the format of Qwen's and many other chat models), which llama.cpp's
// llama_chat_apply_template recognises: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message,
// then "<|im_start|>assistant\n".
inline constexpr std::string_view k_dummy_chat_template =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

struct DummyGgufOptions {
  uint32_t ggml_type = 1;  // type of the weight matrices (F16); norms and routers stay F32
  uint64_t seed = 0;
  // tokenizer.chat_template; empty writes none.
  std::string chat_template{k_dummy_chat_template};
};

// A planned file: metadata and tensors set in `writer`, how each tensor is filled.
struct DummyGguf {
  std::string arch;  // llama.cpp architecture ("llama", "qwen2", ...)
  GgufWriter writer;
  std::vector<DummyFill> fills;  // one per tensor, same order as writer.tensors()
  uint64_t tensor_bytes = 0;     // sum of the tensors' data bytes
};

struct DummyGgufSummary {
  std::string arch;
  uint64_t n_tensors = 0;
  uint64_t tensor_bytes = 0;  // sum of the tensors' data bytes
  uint64_t file_bytes = 0;
};

// The architectures make-gguf writes, as "llama.cpp arch (HF model_types)" lines.
std::span<const std::string_view> dummy_gguf_supported();

// The ggml type id for a --type name (f16, bf16, f32, q8_0, q4_0, q4_k; case-insensitive);
// usage error listing the choices otherwise.
Expected<uint32_t> parse_dummy_type(std::string_view name);

// The llama.cpp architecture for `spec`; input error naming the model_type and the supported
// list when there is none.
Expected<std::string> dummy_gguf_arch(const ModelSpec& spec);

// Plans the file for `spec` (nothing written), each matrix of options.ggml_type or, with `mix`,
// of the type llama-quantize gives it in that mix; input error for an unsupported architecture or
// structure (MLA, SSM, shared experts, ...) or dimensions llama.cpp cannot load.
Expected<DummyGguf> plan_dummy_gguf(const ModelSpec& spec, const DummyGgufOptions& options,
                                    const std::optional<GgufMix>& mix = std::nullopt);

// Writes the planned file to `path` (temporary file + rename; deterministic for a seed);
// returns an io error when it cannot be written.
Expected<DummyGgufSummary> write_dummy_gguf(const DummyGguf& plan, const DummyGgufOptions& options,
                                            const std::filesystem::path& path,
                                            const GgufProgressFn& progress = {});

}  // namespace kvprof::model
