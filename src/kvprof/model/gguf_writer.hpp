// GGUF v3 writer: metadata key/values of every common type, tensor infos, and tensor data
// streamed in block-aligned chunks from a caller's fill function (never the whole model in
// memory), written to a temporary file that is renamed into place only when complete.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::model {

// One tensor to be written: ggml type id and ggml shape (ne[0] first, the contiguous dim).
struct GgufTensorPlan {
  std::string name;
  uint32_t ggml_type = 0;
  std::vector<uint64_t> shape;
  uint64_t bytes = 0;   // exact data bytes (set by GgufWriter::add_tensor)
  uint64_t offset = 0;  // from the start of the data section (set by add_tensor)
};

// Fills `out` with the bytes of tensor `index` starting at byte `offset_bytes` of its data;
// `out` always starts and ends on a whole ggml block.
using GgufFillFn = std::function<void(size_t index, uint64_t offset_bytes, std::span<uint8_t> out)>;
// Told the bytes of tensor data written so far and the total, after every chunk.
using GgufProgressFn = std::function<void(uint64_t written_bytes, uint64_t total_bytes)>;

class GgufWriter {
 public:
  // A writer aligning tensor data to `alignment_bytes` (a power of two; other than GGUF's 32 it
  // is written as general.alignment).
  explicit GgufWriter(uint32_t alignment_bytes = 32);

  // Metadata setters; each returns an input error for a key that was already set, and for
  // general.alignment (the constructor's to write: a different one would misplace every tensor).
  Expected<void> set_string(std::string_view key, std::string_view value);
  Expected<void> set_u32(std::string_view key, uint32_t value);
  Expected<void> set_i32(std::string_view key, int32_t value);
  Expected<void> set_u64(std::string_view key, uint64_t value);
  Expected<void> set_f32(std::string_view key, float value);
  Expected<void> set_bool(std::string_view key, bool value);
  Expected<void> set_strings(std::string_view key, std::span<const std::string> values);
  Expected<void> set_f32s(std::string_view key, std::span<const float> values);
  Expected<void> set_i32s(std::string_view key, std::span<const int32_t> values);
  Expected<void> set_u32s(std::string_view key, std::span<const uint32_t> values);
  Expected<void> set_bools(std::string_view key, std::span<const bool> values);

  // Adds a tensor; input error for a duplicate or over-long name (ggml keeps 63 bytes), more
  // than 4 dims, an unknown ggml type, or a row (ne[0]) that is not a whole number of blocks.
  Expected<void> add_tensor(std::string name, uint32_t ggml_type, std::vector<uint64_t> shape);

  [[nodiscard]] const std::vector<GgufTensorPlan>& tensors() const { return m_tensors; }
  // Bytes of the data section (tensors and the padding between them).
  [[nodiscard]] uint64_t data_bytes() const { return m_data_bytes; }
  // Bytes of the whole file write() produces.
  [[nodiscard]] uint64_t file_bytes() const;

  // Writes the file: `fill` provides tensor data in chunks of at most `chunk_bytes`; the file is
  // written to `<path>.tmp.<pid>` and renamed to `path` only when complete, so a failure never
  // leaves a partial file. Returns an io error naming the path.
  Expected<void> write(const std::filesystem::path& path, const GgufFillFn& fill,
                       const GgufProgressFn& progress = {},
                       uint64_t chunk_bytes = 8ULL << 20) const;

 private:
  Expected<void> begin_key(std::string_view key, uint32_t type);
  void put_u32(uint32_t v);
  void put_u64(uint64_t v);
  void put_str(std::string_view s);
  template <class T>
  void put_raw(const T& v);

  uint32_t m_alignment_bytes;
  std::vector<uint8_t> m_kv;  // encoded key/value pairs
  uint64_t m_n_kv = 0;
  std::unordered_set<std::string> m_keys;
  std::unordered_set<std::string> m_tensor_names;
  std::vector<GgufTensorPlan> m_tensors;
  uint64_t m_data_bytes = 0;
};

}  // namespace kvprof::model
