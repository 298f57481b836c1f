// safetensors headers: the 8-byte little-endian header length and the JSON header that follows,
// read without touching tensor data; and model folders (single file or index + shards).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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

// Shard file -> the tensor names model.safetensors.index.json puts in it.
using ShardMap = std::map<std::string, std::vector<std::string>>;
inline constexpr size_t k_max_shards = 10'000;
// Largest model.safetensors.index.json kvprof reads.
inline constexpr uint64_t k_max_safetensors_index_bytes = 64ULL << 20;

// Parses model.safetensors.index.json (at most 64 MiB and 10,000 shards, each a plain file name);
// an input error naming `where` and the defect otherwise.
Expected<ShardMap> parse_safetensors_index(std::string_view text, std::string_view where);

// Joins the tensors read from each shard (shard file, tensors), checking that no tensor is in two
// shards and that each shard holds what `index` puts in it.
Expected<std::vector<TensorInfo>> join_shards(
    const ShardMap& index, std::vector<std::pair<std::string, std::vector<TensorInfo>>> shards,
    std::string_view where);

// Reads only the header of one .safetensors file.
Expected<std::vector<TensorInfo>> read_safetensors_header(const std::filesystem::path& file);

// Reads every tensor header of a model folder: model.safetensors, or
// model.safetensors.index.json and the shards it names (each shard opened once).
Expected<std::vector<TensorInfo>> read_safetensors_folder(const std::filesystem::path& folder);

}  // namespace kvprof::model
