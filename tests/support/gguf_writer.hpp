// Test-only GGUF writer: builds GGUF v2/v3 files byte by byte (metadata of every value type,
// tensor infos, aligned zero-filled data), with hooks to write deliberately broken files.
// Sizes of quantized blocks are given here from ggml's block structs, independently of the
// parser's table, so tests compare two sources.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvprof::test {

// Little-endian byte sink.
struct Bytes {
  std::vector<uint8_t> data;

  template <class T>
  Bytes& put(T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    data.insert(data.end(), raw, raw + sizeof(T));
    return *this;
  }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    data.insert(data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& b) {
    data.insert(data.end(), b.begin(), b.end());
    return *this;
  }
};

// GGUF value type ids (gguf.md).
namespace gguf_type {
inline constexpr uint32_t u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
                          string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12;
}

// ggml type ids used by tests (ggml.h).
namespace ggml {
inline constexpr uint32_t F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, Q4_K = 12, Q6_K = 14, BF16 = 30,
                          MXFP4 = 39;
}

// Bytes of `n` elements of a ggml type, from ggml's block layouts (test-side facts).
inline uint64_t test_tensor_bytes(uint32_t type, uint64_t n) {
  switch (type) {
    case ggml::F32:
      return n * 4;
    case ggml::F16:
    case ggml::BF16:
      return n * 2;
    case ggml::Q4_0:
      return n / 32 * (2 + 16);  // f16 scale + 32 nibbles
    case ggml::Q8_0:
      return n / 32 * (2 + 32);  // f16 scale + 32 int8
    case ggml::Q4_K:
      return n / 256 * (2 + 2 + 12 + 128);  // d, dmin, scales, nibbles
    case ggml::Q6_K:
      return n / 256 * (128 + 64 + 16 + 2);  // ql, qh, scales, d
    case ggml::MXFP4:
      return n / 32 * (1 + 16);  // e8m0 + 32 e2m1 nibbles
    default:
      throw std::invalid_argument("test_tensor_bytes: type not in the test table");
  }
}

class GgufWriter {
 public:
  struct Tensor {
    std::string name;
    uint32_t type = 0;
    std::vector<uint64_t> dims;
    uint64_t data_bytes = 0;
    std::optional<uint64_t> offset;  // explicit data offset (default: packed and aligned)
  };

  explicit GgufWriter(uint32_t version = 3, uint64_t alignment = 32)
      : m_version(version), m_alignment(alignment) {}

  // Scalars.
  GgufWriter& u8(const std::string& k, uint8_t v) { return kv(k, gguf_type::u8, Bytes{}.put(v)); }
  GgufWriter& i8(const std::string& k, int8_t v) { return kv(k, gguf_type::i8, Bytes{}.put(v)); }
  GgufWriter& u16(const std::string& k, uint16_t v) {
    return kv(k, gguf_type::u16, Bytes{}.put(v));
  }
  GgufWriter& i16(const std::string& k, int16_t v) { return kv(k, gguf_type::i16, Bytes{}.put(v)); }
  GgufWriter& u32(const std::string& k, uint32_t v) {
    return kv(k, gguf_type::u32, Bytes{}.put(v));
  }
  GgufWriter& i32(const std::string& k, int32_t v) { return kv(k, gguf_type::i32, Bytes{}.put(v)); }
  GgufWriter& u64(const std::string& k, uint64_t v) {
    return kv(k, gguf_type::u64, Bytes{}.put(v));
  }
  GgufWriter& i64(const std::string& k, int64_t v) { return kv(k, gguf_type::i64, Bytes{}.put(v)); }
  GgufWriter& f32(const std::string& k, float v) { return kv(k, gguf_type::f32, Bytes{}.put(v)); }
  GgufWriter& f64(const std::string& k, double v) { return kv(k, gguf_type::f64, Bytes{}.put(v)); }
  GgufWriter& boolean(const std::string& k, bool v) {
    return kv(k, gguf_type::boolean, Bytes{}.put(static_cast<uint8_t>(v ? 1 : 0)));
  }
  GgufWriter& str(const std::string& k, const std::string& v) {
    return kv(k, gguf_type::string, Bytes{}.str(v));
  }

  // Arrays.
  GgufWriter& arr_u32(const std::string& k, const std::vector<uint32_t>& v) {
    Bytes b;
    b.u32(gguf_type::u32).u64(v.size());
    for (auto x : v)
      b.put(x);
    return kv(k, gguf_type::array, b);
  }
  GgufWriter& arr_i32(const std::string& k, const std::vector<int32_t>& v) {
    Bytes b;
    b.u32(gguf_type::i32).u64(v.size());
    for (auto x : v)
      b.put(x);
    return kv(k, gguf_type::array, b);
  }
  GgufWriter& arr_bool(const std::string& k, const std::vector<bool>& v) {
    Bytes b;
    b.u32(gguf_type::boolean).u64(v.size());
    for (bool x : v)
      b.put(static_cast<uint8_t>(x ? 1 : 0));
    return kv(k, gguf_type::array, b);
  }
  GgufWriter& arr_str(const std::string& k, const std::vector<std::string>& v) {
    Bytes b;
    b.u32(gguf_type::string).u64(v.size());
    for (const auto& s : v)
      b.str(s);
    return kv(k, gguf_type::array, b);
  }

  // A key with a value type id and the raw bytes that follow it.
  GgufWriter& kv(const std::string& key, uint32_t type, const Bytes& payload) {
    m_kv.str(key).u32(type).raw(payload.data);
    ++m_n_kv;
    return *this;
  }

  // A tensor whose data size the test-side table knows.
  GgufWriter& tensor(const std::string& name, uint32_t type, std::vector<uint64_t> dims) {
    uint64_t n = 1;
    for (auto d : dims)
      n *= d;
    return raw_tensor({name, type, std::move(dims), test_tensor_bytes(type, n), std::nullopt});
  }
  GgufWriter& raw_tensor(Tensor t) {
    m_tensors.push_back(std::move(t));
    return *this;
  }

  // Overrides for broken files.
  GgufWriter& magic(const std::string& m) {
    m_magic = m;
    return *this;
  }
  GgufWriter& tensor_count(uint64_t n) {
    m_tensor_count = n;
    return *this;
  }
  GgufWriter& kv_count(uint64_t n) {
    m_kv_count = n;
    return *this;
  }

  // The whole file: header, metadata, tensor infos, padding, data (last tensor ends the file).
  [[nodiscard]] std::vector<uint8_t> build() const {
    Bytes out;
    out.data.insert(out.data.end(), m_magic.begin(), m_magic.end());
    out.u32(m_version);
    out.u64(m_tensor_count.value_or(m_tensors.size()));
    out.u64(m_kv_count.value_or(m_n_kv));
    out.raw(m_kv.data);
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    uint64_t data_end = 0;
    for (const auto& t : m_tensors) {
      const uint64_t off = t.offset.value_or(align(next));
      offsets.push_back(off);
      next = off + t.data_bytes;
      // Data (zeros) up to the end of the last tensor; absurd offsets of broken files get none.
      if (next <= (1ULL << 30)) data_end = std::max(data_end, next);
    }
    for (size_t i = 0; i < m_tensors.size(); ++i) {
      const auto& t = m_tensors[i];
      out.str(t.name).u32(static_cast<uint32_t>(t.dims.size()));
      for (auto d : t.dims)
        out.u64(d);
      out.u32(t.type).u64(offsets[i]);
    }
    if (data_end > 0) {
      out.data.resize(align(out.data.size()) + data_end, 0);
    }
    return out.data;
  }

  // Writes build() to `path`.
  void write(const std::filesystem::path& path) const {
    const auto b = build();
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  }

 private:
  [[nodiscard]] uint64_t align(uint64_t x) const {
    return (x + m_alignment - 1) / m_alignment * m_alignment;
  }

  uint32_t m_version;
  uint64_t m_alignment;
  std::string m_magic = "GGUF";
  Bytes m_kv;
  uint64_t m_n_kv = 0;
  std::vector<Tensor> m_tensors;
  std::optional<uint64_t> m_tensor_count;
  std::optional<uint64_t> m_kv_count;
};

}  // namespace kvprof::test
