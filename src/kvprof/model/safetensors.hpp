// safetensors headers: the 8-byte little-endian header length and the JSON header that follows,
// read without touching tensor data; and model folders (single file or index + shards).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::model {

// Largest header kvprof accepts (safetensors itself caps it at 100 MB).
inline constexpr uint64_t k_max_safetensors_header_bytes = 100'000'000;

// Parses a safetensors header from `prefix` (the file's first bytes: 8-byte length + JSON) for a
// file of `file_size` bytes. Every offset is checked against the file size, overlapping or
// duplicate tensors are rejected; returns an input error describing the first defect.
Expected<std::vector<TensorInfo>> parse_safetensors_header(std::span<const uint8_t> prefix,
                                                           uint64_t file_size);

// Reads only the header of one .safetensors file.
Expected<std::vector<TensorInfo>> read_safetensors_header(const std::filesystem::path& file);

// Reads every tensor header of a model folder: model.safetensors, or
// model.safetensors.index.json and the shards it names (each shard opened once).
Expected<std::vector<TensorInfo>> read_safetensors_folder(const std::filesystem::path& folder);

}  // namespace kvprof::model
