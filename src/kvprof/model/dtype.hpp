// Element types of weights, activations and the KV cache, and their sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvprof::model {

enum class DType : uint8_t {
  f64,
  f32,
  f16,
  bf16,
  f8_e4m3,
  f8_e5m2,
  f8_e8m0,  // MX block scales
  i64,
  i32,
  i16,
  i8,
  u8,
  boolean,
  i4,       // packed, two per byte
  f4_e2m1,  // MXFP4 / NVFP4 elements, two per byte
};

// Bits per element of `t` (4 for the packed 4-bit types).
uint32_t dtype_bits(DType t);

// Canonical short name: "f32", "bf16", "fp8_e4m3", ...
std::string_view dtype_name(DType t);

// Parses torch/HF/safetensors/CLI spellings: "bfloat16", "bf16", "BF16", "float16", "half",
// "fp16", "float32", "float", "F8_E4M3", "fp8", "fp8_e4m3", "fp8_e5m2", "int8", "I64", ...;
// returns nullopt for anything else.
std::optional<DType> parse_dtype(std::string_view text);

}  // namespace kvprof::model
