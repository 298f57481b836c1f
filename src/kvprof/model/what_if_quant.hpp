// What-if quantization: an unquantized model priced as a quantized checkpoint of it would be
// (`estimate -q awq` on Llama-3.1-8B-Instruct ~ hugging-quants' AWQ-INT4 checkpoint), with the
// modules such checkpoints leave unquantized.
#pragma once

#include <optional>
#include <string_view>

#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::model {

// The methods what_if_quantization knows, for messages.
inline constexpr std::string_view k_what_if_methods =
    "awq, gptq, w4a16, w8a8, fp8, fp8-dynamic and fp8-block (fp8 checkpoints), nvfp4, mxfp4 (MoE "
    "experts), bnb-4bit";

// The quantization a typical published checkpoint of `method` has (AWQ and GPTQ 4-bit with groups
// of 128, llm-compressor's w4a16, int8 w8a8 and fp8-dynamic, block-wise fp8, ModelOpt NVFP4, MXFP4
// on MoE experts, bitsandbytes NF4), parsed from the quantization_config such a checkpoint
// publishes; nullopt when `method` is not a what-if method. Marked as not from the checkpoint.
std::optional<Expected<Quantization>> what_if_quantization(std::string_view method);

}  // namespace kvprof::model
