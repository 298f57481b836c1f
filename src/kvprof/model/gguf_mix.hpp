// llama.cpp's quantization mixes ("Q4_K_M", "Q8_0", ...): the ggml type `llama-quantize` gives
// each tensor of a model for a file type — the default type for most matrices, more bits for the
// sensitive ones (attn_v and ffn_down in some layers, the output layer), F32 for vectors and
// norms, a fallback where a row is not a whole number of blocks. Lets kvprof price an
// unquantized model as its GGUF checkpoint (`estimate --engine llamacpp -q Q4_K_M`) and write
// such a file with dummy weights (`make-gguf --type q4_k_m`).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvprof::model {

struct GgufMix {
  std::string name;           // "Q4_K_M"
  uint32_t file_type = 0;     // general.file_type (LLAMA_FTYPE_*)
  uint32_t default_type = 0;  // the ggml type of most matrices
};

// The mixes kvprof knows, for messages: "Q8_0, Q6_K, Q5_K_M, ...".
std::string gguf_mix_names();

// The mix `name` names (any case, "q4_k_m" or "Q4_K_M"); nullopt for another word.
std::optional<GgufMix> find_gguf_mix(std::string_view name);

// What the type choice depends on besides each tensor.
struct MixModel {
  std::string arch;      // llama.cpp architecture ("llama", "qwen2", ...)
  uint32_t n_layer = 0;  // repeating blocks
  uint32_t n_expert = 0;
  uint32_t n_gqa = 1;  // query heads per KV head
};

// One tensor of the file, in file order.
struct MixTensor {
  std::string name;             // GGUF name ("blk.3.attn_v.weight")
  std::vector<uint64_t> shape;  // ne[0] first
};

// The ggml type of each of `tensors` under `mix`, as llama-quantize chooses it (without an
// importance matrix or overrides): vectors and tensors it never quantizes (norms, routers) F32.
std::vector<uint32_t> assign_mix_types(const GgufMix& mix, const MixModel& model,
                                       std::span<const MixTensor> tensors);

}  // namespace kvprof::model
