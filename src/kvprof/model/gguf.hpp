// GGUF files (llama.cpp): header, metadata key/values and tensor infos, parsed with every count
// and length bounded before allocating; exact bytes per tensor for every ggml type.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::model {

// Most dimensions a ggml tensor has (GGML_MAX_DIMS).
inline constexpr uint32_t k_max_gguf_dims = 4;

// ggml's tensor type ids (ggml.h's enum ggml_type) that kvprof writes by name.
namespace ggml_type {
inline constexpr uint32_t f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8,
                          q4_k = 12, q5_k = 13, q6_k = 14, bf16 = 30, mxfp4 = 39;
}  // namespace ggml_type

// GGUF metadata value type ids (gguf.md).
enum class GgufType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

// Largest header (metadata + tensor infos) read_gguf() accepts.
inline constexpr uint64_t k_max_gguf_header_bytes = 512ULL << 20;
// Bounds on the counts a GGUF header may declare.
inline constexpr uint64_t k_max_gguf_tensors = 1'000'000;
inline constexpr uint64_t k_max_gguf_kvs = 100'000;
// Arrays keep at most this many elements (the declared length is always recorded).
inline constexpr uint64_t k_gguf_kept_numbers = 4096;  // numeric / bool elements (per-layer arrays)
inline constexpr uint64_t k_gguf_kept_strings = 64;    // string or nested-array elements

// A scalar metadata value, or an array (strings kept only up to a bounded count).
struct GgufValue {
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<GgufValue>> value;
  GgufType type = GgufType::u64;        // type as stored in the file
  GgufType array_type = GgufType::u64;  // element type when `type` is array
  uint64_t array_length = 0;            // declared element count (>= elements kept)

  [[nodiscard]] bool is_array() const { return type == GgufType::array; }
  // The value as an unsigned integer: unsigned types, or signed ones >= 0; else nullopt.
  [[nodiscard]] std::optional<uint64_t> as_uint() const;
  // The string, or nullptr when the value is not a string.
  [[nodiscard]] const std::string* as_string() const;
  // Kept elements of an array (empty for scalars).
  [[nodiscard]] std::span<const GgufValue> elements() const;
};

struct GgufFile {
  uint32_t version = 0;
  std::map<std::string, GgufValue> metadata;
  std::vector<TensorInfo> tensors;       // type_name is the ggml type ("Q4_K"), bytes exact
  std::vector<uint32_t> tensor_types;    // ggml type id of each tensor, same order as `tensors`
  std::vector<uint64_t> tensor_offsets;  // offset of each tensor's data from data_offset
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // where tensor data starts

  // The value of `key`, or nullptr when absent.
  [[nodiscard]] const GgufValue* find(const std::string& key) const;
  // Declared element count of the array at `key`; nullopt when absent or not an array.
  [[nodiscard]] std::optional<uint64_t> array_length(const std::string& key) const;
};

// Elements per block and bytes per block of a ggml type; nullopt when unknown.
struct GgmlBlock {
  uint32_t block_elements = 0;
  uint32_t block_bytes = 0;
};
std::optional<GgmlBlock> ggml_block(uint32_t ggml_type);

// Bytes of one tensor of ggml type `ggml_type` with `n_elements` elements; nullopt for an
// unknown type or an element count that is not a whole number of blocks.
std::optional<uint64_t> ggml_tensor_bytes(uint32_t ggml_type, uint64_t n_elements);

// Name of a ggml type ("F16", "Q4_K", "IQ2_XS", "MXFP4"), or nullopt when unknown.
std::optional<std::string> ggml_type_name(uint32_t ggml_type);

// True for the unquantized float types (F32, F16, BF16, F64).
bool ggml_type_is_float(uint32_t ggml_type);

// Name of a llama.cpp file type (general.file_type: 15 -> "Q4_K_M"), or nullopt when unknown.
std::optional<std::string> llama_file_type_name(uint64_t file_type);

// Parses a GGUF header + metadata + tensor infos from `bytes` (a prefix of the file is enough
// when it holds the whole header) for a file of `file_size` bytes; returns an input error
// describing the first defect.
Expected<GgufFile> parse_gguf(std::span<const uint8_t> bytes, uint64_t file_size);

// Reads the header part of a .gguf file (never the tensor data), growing the read only as the
// header needs, up to k_max_gguf_header_bytes; not_found for a missing file, io when reading
// fails, input for a malformed file.
Expected<GgufFile> read_gguf(const std::filesystem::path& file);

// Builds a ModelSpec (architecture dims from "<arch>.*" keys, exact tensors) from a GGUF file;
// returns an input error naming the missing key.
Expected<ModelSpec> model_from_gguf(const GgufFile& gguf, std::string_view source);

}  // namespace kvprof::model
