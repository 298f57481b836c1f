// Dummy tensor data: xoshiro256** random bits turned into small floats (through a 65536-entry
// table for F16/BF16, 4 values per 64-bit draw) or into ggml quant blocks (f16 scales chosen so
// dequantized values stay within about +-k_dummy_weight_range, random quants).
#include "kvprof/model/dummy_weights.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <vector>

#include "kvprof/model/gguf.hpp"

namespace kvprof::model {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman and Vigna), seeded through splitmix64.
class Xoshiro {
 public:
  Xoshiro(uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ splitmix64(stream);
    for (auto& s : m_s)
      s = splitmix64(x);
  }
  uint64_t next() {
    const uint64_t result = std::rotl(m_s[1] * 5, 7) * 9;
    const uint64_t t = m_s[1] << 17;
    m_s[2] ^= m_s[0];
    m_s[3] ^= m_s[1];
    m_s[1] ^= m_s[2];
    m_s[0] ^= m_s[3];
    m_s[2] ^= t;
    m_s[3] = std::rotl(m_s[3], 45);
    return result;
  }
  // Fills `out` with random bytes.
  void bytes(uint8_t* out, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const uint64_t r = next();
      std::memcpy(out + i, &r, 8);
    }
    if (i < n) {
      const uint64_t r = next();
      std::memcpy(out + i, &r, n - i);
    }
  }

 private:
  std::array<uint64_t, 4> m_s{};
};

// 16-bit float bits of 65536 values spread uniformly over +-k_dummy_weight_range.
std::vector<uint16_t> make_table(bool bf16) {
  std::vector<uint16_t> table(65536);
  for (uint32_t j = 0; j < 65536; ++j) {
    const float v = k_dummy_weight_range * ((static_cast<float>(j) - 32767.5F) / 32768.0F);
    table[j] = bf16 ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
  }
  return table;
}

void fill_16bit(const std::vector<uint16_t>& table, Xoshiro& rng, std::span<uint8_t> out) {
  const size_t n = out.size() / 2;
  uint16_t tmp[4];
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const uint64_t r = rng.next();
    tmp[0] = table[r & 0xFFFF];
    tmp[1] = table[(r >> 16) & 0xFFFF];
    tmp[2] = table[(r >> 32) & 0xFFFF];
    tmp[3] = table[r >> 48];
    std::memcpy(out.data() + i * 2, tmp, 8);
  }
  for (; i < n; ++i) {
    const uint16_t v = table[rng.next() & 0xFFFF];
    std::memcpy(out.data() + i * 2, &v, 2);
  }
}

void fill_f32(Xoshiro& rng, std::span<uint8_t> out) {
  const size_t n = out.size() / 4;
  constexpr float k_scale = k_dummy_weight_range / 2147483648.0F;
  for (size_t i = 0; i < n; i += 2) {
    const uint64_t r = rng.next();
    const float a = static_cast<float>(static_cast<int32_t>(static_cast<uint32_t>(r))) * k_scale;
    std::memcpy(out.data() + i * 4, &a, 4);
    if (i + 1 < n) {
      const float b = static_cast<float>(static_cast<int32_t>(r >> 32)) * k_scale;
      std::memcpy(out.data() + (i + 1) * 4, &b, 4);
    }
  }
}

void fill_ones(uint32_t type, std::span<uint8_t> out) {
  if (type == ggml_type::f32) {
    const float one = 1.0F;
    for (size_t i = 0; i + 4 <= out.size(); i += 4)
      std::memcpy(out.data() + i, &one, 4);
  } else if (type == ggml_type::f16 || type == ggml_type::bf16) {
    const uint16_t one = type == ggml_type::f16 ? f32_to_f16_bits(1.0F) : f32_to_bf16_bits(1.0F);
    for (size_t i = 0; i + 2 <= out.size(); i += 2)
      std::memcpy(out.data() + i, &one, 2);
  } else {
    std::fill(out.begin(), out.end(), uint8_t{0});
  }
}

// Quant blocks: `header` f16 scales at the start of each block of `block_bytes`, random rest.
void fill_blocks(Xoshiro& rng, std::span<uint8_t> out, size_t block_bytes,
                 std::span<const uint16_t> header) {
  const size_t header_bytes = header.size() * 2;
  for (size_t b = 0; b + block_bytes <= out.size(); b += block_bytes) {
    std::memcpy(out.data() + b, header.data(), header_bytes);
    rng.bytes(out.data() + b + header_bytes, block_bytes - header_bytes);
  }
}

}  // namespace

uint16_t f32_to_f16_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (x >> 16) & 0x8000U;
  const uint32_t abs = x & 0x7FFFFFFFU;
  if (abs > 0x7F800000U) return static_cast<uint16_t>(sign | 0x7E00U);  // NaN
  const int32_t e = static_cast<int32_t>(abs >> 23) - 127 + 15;
  uint32_t m = abs & 0x7FFFFFU;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00U);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    m |= 0x800000U;
    const uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = m >> shift;
    const uint32_t rem = m & ((1U << shift) - 1);
    const uint32_t halfway = 1U << (shift - 1);
    if (rem > halfway || (rem == halfway && (half & 1U) != 0)) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(e) << 10) | (m >> 13);
  const uint32_t rem = m & 0x1FFFU;
  if (rem > 0x1000U || (rem == 0x1000U && (half & 1U) != 0)) ++half;
  return static_cast<uint16_t>(sign | half);
}

float f16_bits_to_f32(uint16_t bits) {
  const uint32_t sign = (static_cast<uint32_t>(bits) & 0x8000U) << 16;
  const uint32_t e = (bits >> 10) & 0x1FU;
  const uint32_t m = bits & 0x3FFU;
  if (e == 0) {
    const float v = static_cast<float>(m) * (1.0F / 16777216.0F);  // m * 2^-24
    return sign != 0 ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7F800000U | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t f32_to_bf16_bits(float value) {
  const uint32_t x = std::bit_cast<uint32_t>(value);
  if ((x & 0x7FFFFFFFU) > 0x7F800000U) return static_cast<uint16_t>((x >> 16) | 0x40U);
  return static_cast<uint16_t>((x + 0x7FFFU + ((x >> 16) & 1U)) >> 16);
}

void fill_dummy(uint32_t ggml_type, DummyFill kind, uint64_t seed, uint64_t offset_bytes,
                std::span<uint8_t> out) {
  if (kind == DummyFill::ones) {
    fill_ones(ggml_type, out);
    return;
  }
  Xoshiro rng(seed, offset_bytes);
  constexpr float a = k_dummy_weight_range;
  switch (ggml_type) {
    case ggml_type::f32:
      fill_f32(rng, out);
      return;
    case ggml_type::f16: {
      static const std::vector<uint16_t> table = make_table(false);
      fill_16bit(table, rng, out);
      return;
    }
    case ggml_type::bf16: {
      static const std::vector<uint16_t> table = make_table(true);
      fill_16bit(table, rng, out);
      return;
    }
    case ggml_type::q8_0: {  // d, 32 x int8: value = d * q
      const uint16_t d[1] = {f32_to_f16_bits(a / 127.0F)};
      fill_blocks(rng, out, 34, d);
      return;
    }
    case ggml_type::q4_0: {  // d, 16 bytes of nibbles: value = d * (q - 8)
      const uint16_t d[1] = {f32_to_f16_bits(a / 8.0F)};
      fill_blocks(rng, out, 18, d);
      return;
    }
    case ggml_type::q4_k: {  // d, dmin, 12 bytes of 6-bit scales/mins, 128 bytes of nibbles:
                             // value = d * sc * q - dmin * m, within about [-a/2, a]
      const uint16_t dm[2] = {f32_to_f16_bits(a / 945.0F), f32_to_f16_bits(a / 126.0F)};
      fill_blocks(rng, out, 144, dm);
      return;
    }
    case ggml_type::q4_1: {  // d, m, 16 bytes of nibbles: value = d * q + m
      const uint16_t dm[2] = {f32_to_f16_bits(a / 8.0F), f32_to_f16_bits(-a)};
      fill_blocks(rng, out, 20, dm);
      return;
    }
    case ggml_type::q5_0: {  // d, 4 bytes of high bits, 16 bytes of nibbles: value = d * (q - 16)
      const uint16_t d[1] = {f32_to_f16_bits(a / 16.0F)};
      fill_blocks(rng, out, 22, d);
      return;
    }
    case ggml_type::q5_1: {  // d, m, 4 bytes of high bits, 16 bytes of nibbles: value = d * q + m
      const uint16_t dm[2] = {f32_to_f16_bits(a / 16.0F), f32_to_f16_bits(-a)};
      fill_blocks(rng, out, 24, dm);
      return;
    }
    case ggml_type::q5_k: {  // d, dmin, 12 bytes of scales/mins, 32 of high bits, 128 of nibbles
      const uint16_t dm[2] = {f32_to_f16_bits(a / 1953.0F), f32_to_f16_bits(a / 126.0F)};
      fill_blocks(rng, out, 176, dm);
      return;
    }
    case ggml_type::q6_k: {  // 128 + 64 bytes of quants, 16 int8 scales, d last: value = d * sc *
                             // (q - 32)
      const uint16_t d = f32_to_f16_bits(a / 4096.0F);
      for (size_t b = 0; b + 210 <= out.size(); b += 210) {
        rng.bytes(out.data() + b, 208);
        std::memcpy(out.data() + b + 208, &d, 2);
      }
      return;
    }
    default:
      std::fill(out.begin(), out.end(), uint8_t{0});
  }
}

}  // namespace kvprof::model
