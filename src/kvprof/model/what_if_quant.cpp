// What-if quantization (see what_if_quant.hpp).
#include "kvprof/model/what_if_quant.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "kvprof/model/hf_config.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::model {

namespace {

// The quantization_config of the usual public checkpoint of each method (facts of their
// config.json files: hugging-quants AWQ-INT4, Qwen GPTQ-Int4, RedHatAI quantized.w4a16 / .w8a8
// and fp8-dynamic, NVIDIA ModelOpt FP4, unsloth bnb-4bit, openai gpt-oss MXFP4).
const char* config_of(const std::string& method) {
  if (method == "awq") {
    return R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true,
               "version": "gemm"})";
  }
  if (method == "gptq") {
    return R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false,
               "sym": true})";
  }
  if (method == "w4a16") {
    return R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
               "ignore": ["lm_head"],
               "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": null,
                 "weights": {"num_bits": 4, "type": "int", "symmetric": true,
                             "strategy": "group", "group_size": 128}}}})";
  }
  if (method == "w8a8") {
    return R"({"quant_method": "compressed-tensors", "format": "int-quantized",
               "ignore": ["lm_head"],
               "config_groups": {"group_0": {"targets": ["Linear"],
                 "input_activations": {"num_bits": 8, "type": "int", "symmetric": true,
                                       "dynamic": true, "strategy": "token"},
                 "weights": {"num_bits": 8, "type": "int", "symmetric": true,
                             "strategy": "channel"}}}})";
  }
  if (method == "nvfp4") {
    return R"({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
               "exclude_modules": ["lm_head"]})";
  }
  if (method == "mxfp4") return R"({"quant_method": "mxfp4"})";
  // Checkpoints in fp8 (what a "-FP8" / "-FP8-dynamic" id holds; `-q fp8` is vLLM's own
  // quantization at load instead): RedHatAI's channel-wise fp8-dynamic, and the block-wise
  // (128 x 128) fp8 of Qwen's and DeepSeek's own FP8 releases.
  if (method == "fp8-dynamic") {
    return R"({"quant_method": "compressed-tensors", "format": "float-quantized",
               "ignore": ["lm_head"],
               "config_groups": {"group_0": {"targets": ["Linear"],
                 "input_activations": {"num_bits": 8, "type": "float", "symmetric": true,
                                       "dynamic": true, "strategy": "token"},
                 "weights": {"num_bits": 8, "type": "float", "symmetric": true,
                             "strategy": "channel"}}}})";
  }
  if (method == "fp8-block") {
    return R"({"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3",
               "weight_block_size": [128, 128]})";
  }
  if (method == "bnb-4bit" || method == "bnb_4bit" || method == "nf4") {
    return R"({"quant_method": "bitsandbytes", "load_in_4bit": true,
               "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true,
               "llm_int8_skip_modules": ["lm_head"]})";
  }
  return nullptr;
}

}  // namespace

std::optional<Expected<Quantization>> what_if_quantization(std::string_view method) {
  const char* config = config_of(to_lower(trim(method)));
  if (config == nullptr) return std::nullopt;
  auto q = parse_quantization_config(nlohmann::json::parse(config));
  if (q) q->from_checkpoint = false;
  return q;
}

}  // namespace kvprof::model
