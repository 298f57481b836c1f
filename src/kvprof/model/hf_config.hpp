// Hugging Face config.json -> ModelSpec: text_config nesting for vision-language models,
// quantization_config (AWQ, GPTQ, compressed-tensors, bitsandbytes, fp8, mxfp4), torch_dtype /
// dtype, tied embeddings, layer types (sliding/full, linear attention, mamba), MoE and MLA.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::model {

// Largest config.json kvprof reads (16 MiB).
inline constexpr uint64_t k_max_config_json_bytes = 16ULL << 20;

// Builds a ModelSpec from a parsed config.json object; `source` names where it came from (a
// path or a catalog citation). Returns an input error naming the missing or contradictory
// field; unknown architectures parse with a warning when the standard fields are present.
Expected<ModelSpec> parse_hf_config(const nlohmann::json& config, std::string_view source);

// Same, from the text of a config.json (at most 16 MiB); returns an input error for bad JSON.
Expected<ModelSpec> parse_hf_config_text(std::string_view text, std::string_view source);

// A checkpoint's quantization_config (AWQ, GPTQ, compressed-tensors, bitsandbytes, fp8, mxfp4,
// ModelOpt) as kvprof prices it; an input error names an unknown method or a malformed field.
Expected<Quantization> parse_quantization_config(const nlohmann::json& config);

}  // namespace kvprof::model
