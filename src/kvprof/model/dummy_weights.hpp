// Random ("dummy") tensor data that is numerically sane for inference: floats uniform in
// +-k_dummy_weight_range, norm weights 1.0, quantized blocks with small valid f16 scales and
// random quants. Fast (a xoshiro256** stream and a lookup table per 16-bit float type) and
// deterministic for a seed.
#pragma once

#include <cstdint>
#include <span>

namespace kvprof::model {

inline constexpr float k_dummy_weight_range = 0.02F;

enum class DummyFill : uint8_t {
  random,  // uniform in +-k_dummy_weight_range (matrices, embeddings, biases)
  ones,    // every element 1.0 (norm weights)
};

// Fills `out`, whole blocks of `ggml_type` starting at byte `offset_bytes` of a tensor, from a
// stream seeded by (`seed`, `offset_bytes`). Supports F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// Q4_K, Q5_K, Q6_K; other
// types (and `ones` on a quantized type) get zero bytes.
void fill_dummy(uint32_t ggml_type, DummyFill kind, uint64_t seed, uint64_t offset_bytes,
                std::span<uint8_t> out);

// IEEE half bits of `value`, rounded to nearest even (subnormals kept).
uint16_t f32_to_f16_bits(float value);
// The float a half's bits encode.
float f16_bits_to_f32(uint16_t bits);
// bfloat16 bits of `value`, rounded to nearest even.
uint16_t f32_to_bf16_bits(float value);

}  // namespace kvprof::model
