// GGUF files (llama.cpp): header, metadata key/values and tensor infos, parsed with every count
// and length bounded before allocating; exact bytes per tensor for every ggml type.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::model {

// A scalar metadata value, or an array (strings kept only up to a bounded count).
struct GgufValue {
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<GgufValue>> value;
};

struct GgufFile {
  uint32_t version = 0;
  std::map<std::string, GgufValue> metadata;
  std::vector<TensorInfo> tensors;  // type_name is the ggml type ("Q4_K"), bytes exact
  uint64_t alignment = 32;
  uint64_t data_offset = 0;         // where tensor data starts
};

// Bytes of one tensor of ggml type `ggml_type` with `n_elements` elements; nullopt for an
// unknown type or an element count that is not a whole number of blocks.
std::optional<uint64_t> ggml_tensor_bytes(uint32_t ggml_type, uint64_t n_elements);

// Name of a ggml type ("F16", "Q4_K", "IQ2_XS", "MXFP4"), or nullopt when unknown.
std::optional<std::string> ggml_type_name(uint32_t ggml_type);

// Parses a GGUF header + metadata + tensor infos from `bytes` (a prefix of the file is enough
// when it holds the whole header) for a file of `file_size` bytes; returns an input error
// describing the first defect.
Expected<GgufFile> parse_gguf(std::span<const uint8_t> bytes, uint64_t file_size);

// Reads the header part of a .gguf file (never the tensor data).
Expected<GgufFile> read_gguf(const std::filesystem::path& file);

// Builds a ModelSpec (architecture dims from "<arch>.*" keys, exact tensors) from a GGUF file;
// returns an input error naming the missing key.
Expected<ModelSpec> model_from_gguf(const GgufFile& gguf, std::string_view source);

}  // namespace kvprof::model
