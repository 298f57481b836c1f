// safetensors headers (8-byte little-endian length + JSON), checked against the file size:
// dtypes, shapes (overflow-checked), offsets inside the data area, no overlaps or duplicates;
// and model folders (model.safetensors, or model.safetensors.index.json + shards).
#include "kvprof/model/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

#include "kvprof/util/json_input.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::model {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t k_max_safetensors_dim = 1ULL << 48;  // one dimension; real tensors are far below
constexpr size_t k_max_rank = 16;
constexpr int k_max_header_depth = 8;

std::unexpected<Error> bad(std::string message) {
  return fail(ErrorKind::input, std::move(message));
}

// Bits per element of a safetensors dtype name; nullopt when unknown.
std::optional<uint32_t> dtype_bits_of(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, uint32_t>, 21> k_types{{
      {"BOOL", 8}, {"U8", 8},      {"I8", 8},      {"F8_E4M3", 8}, {"F8_E5M2", 8}, {"F8_E8M0", 8},
      {"E8M0", 8}, {"I16", 16},    {"U16", 16},    {"F16", 16},    {"BF16", 16},   {"I32", 32},
      {"U32", 32}, {"F32", 32},    {"F64", 64},    {"I64", 64},    {"U64", 64},    {"C64", 64},
      {"F4", 4},   {"F6_E2M3", 6}, {"F6_E3M2", 6},
  }};
  for (const auto& [n, bits] : k_types) {
    if (n == name) return bits;
  }
  return std::nullopt;
}

Expected<uint64_t> read_offset(const json& v, std::string_view tensor) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    return bad(fmt::format("tensor '{}': data_offsets must be non-negative integers", tensor));
  }
  return v.get<uint64_t>();
}

Expected<TensorInfo> parse_tensor(const std::string& name, const json& v, uint64_t data_bytes,
                                  uint64_t& begin_out) {
  if (!v.is_object()) return bad(fmt::format("tensor '{}' must be an object", name));
  const auto dt = v.find("dtype");
  const auto shape = v.find("shape");
  const auto offsets = v.find("data_offsets");
  if (dt == v.end() || !dt->is_string()) return bad(fmt::format("tensor '{}' has no dtype", name));
  if (shape == v.end() || !shape->is_array())
    return bad(fmt::format("tensor '{}' has no shape", name));
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2) {
    return bad(fmt::format("tensor '{}' needs data_offsets [begin, end]", name));
  }
  TensorInfo t;
  t.name = name;
  t.type_name = dt->get<std::string>();
  const auto bits = dtype_bits_of(t.type_name);
  if (!bits) return bad(fmt::format("tensor '{}' has unknown dtype '{}'", name, t.type_name));
  if (shape->size() > k_max_rank)
    return bad(fmt::format("tensor '{}' has rank > {}", name, k_max_rank));
  uint64_t n_elements = 1;
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0)) {
      return bad(fmt::format("tensor '{}': shape must hold non-negative integers", name));
    }
    const auto dim = d.get<uint64_t>();
    if (dim > k_max_safetensors_dim || __builtin_mul_overflow(n_elements, dim, &n_elements)) {
      return bad(fmt::format("tensor '{}': shape overflows", name));
    }
    t.shape.push_back(dim);
  }
  uint64_t n_bits = 0;
  if (__builtin_mul_overflow(n_elements, uint64_t{*bits}, &n_bits)) {
    return bad(fmt::format("tensor '{}': shape overflows", name));
  }
  if (n_bits % 8 != 0)
    return bad(fmt::format("tensor '{}': {} elements of {} do not fill whole bytes", name,
                           n_elements, t.type_name));
  t.bytes = n_bits / 8;
  auto begin = read_offset((*offsets)[0], name);
  if (!begin) return std::unexpected(begin.error());
  auto end = read_offset((*offsets)[1], name);
  if (!end) return std::unexpected(end.error());
  if (*begin > *end || *end > data_bytes) {
    return bad(fmt::format("tensor '{}': data_offsets [{}, {}] lie outside the {} data bytes", name,
                           *begin, *end, data_bytes));
  }
  if (*end - *begin != t.bytes) {
    return bad(fmt::format("tensor '{}': data_offsets span {} bytes but {} {} needs {}", name,
                           *end - *begin, n_elements, t.type_name, t.bytes));
  }
  begin_out = *begin;
  return t;
}

// Checks a header's shape without building it: duplicate top-level names and nesting depth.
// Returning false stops the parse; `problem` then says why.
struct HeaderCheck : nlohmann::json_sax<json> {
  std::unordered_set<std::string> names;
  std::string problem;
  int depth = 0;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return enter(); }
  bool end_object() override { return leave(); }
  bool start_array(std::size_t) override { return enter(); }
  bool end_array() override { return leave(); }
  bool key(string_t& name) override {
    if (depth == 1 && !names.insert(name).second) {
      problem = fmt::format("safetensors header names tensor '{}' twice", name);
      return false;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& e) override {
    problem = fmt::format("safetensors header is not valid JSON: {}", json_error_text(e));
    return false;
  }

 private:
  bool enter() {
    if (++depth > k_max_header_depth) {
      problem = "safetensors header nests too deeply";
      return false;
    }
    return true;
  }
  bool leave() {
    --depth;
    return true;
  }
};

}  // namespace

Expected<std::vector<TensorInfo>> parse_safetensors_header(std::span<const uint8_t> prefix,
                                                           uint64_t file_size) {
  if (file_size < 8 || prefix.size() < 8) {
    return bad("file is too short for a safetensors header (needs 8 length bytes)");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | prefix[static_cast<size_t>(i)];
  if (n == 0) return bad("safetensors header length is 0");
  if (n > k_max_safetensors_header_bytes) {
    return bad(fmt::format("safetensors header length {} exceeds the {} byte limit", n,
                           k_max_safetensors_header_bytes));
  }
  if (n > file_size - 8) {
    return bad(
        fmt::format("safetensors header length {} exceeds the file ({} bytes)", n, file_size));
  }
  if (prefix.size() - 8 < n) {
    return bad(fmt::format("safetensors header truncated: {} of {} bytes", prefix.size() - 8, n));
  }
  const uint64_t data_bytes = file_size - 8 - n;

  // A SAX pass first rejects duplicate tensor names (the DOM would keep the last) and nesting
  // deeper than any valid header has; then a plain DOM parse. Both are linear in the header
  // (the library's callback parser rescans the whole object at each tensor's end: quadratic).
  const auto* first = reinterpret_cast<const char*>(prefix.data() + 8);
  HeaderCheck check;
  try {
    json::sax_parse(first, first + n, &check);
  } catch (const json::exception& e) {  // e.g. a string that is not UTF-8
    return bad(fmt::format("safetensors header is not valid JSON: {}", json_error_text(e)));
  }
  if (!check.problem.empty()) return bad(check.problem);
  json doc;
  try {
    doc = json::parse(first, first + n);
  } catch (const json::exception& e) {
    return bad(fmt::format("safetensors header is not valid JSON: {}", json_error_text(e)));
  }
  if (!doc.is_object()) return bad("safetensors header must be a JSON object");

  std::vector<std::pair<uint64_t, TensorInfo>> by_offset;
  by_offset.reserve(doc.size());
  for (const auto& [name, v] : doc.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) return bad("safetensors __metadata__ must be an object");
      continue;
    }
    uint64_t begin = 0;
    auto t = parse_tensor(name, v, data_bytes, begin);
    if (!t) return std::unexpected(t.error());
    by_offset.emplace_back(begin, std::move(*t));
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  uint64_t covered_to = 0;
  const std::string* last = nullptr;
  for (const auto& [begin, t] : by_offset) {
    if (t.bytes == 0) continue;
    if (begin < covered_to) {
      return bad(fmt::format("tensors '{}' and '{}' overlap in the data area", *last, t.name));
    }
    covered_to = begin + t.bytes;
    last = &t.name;
  }
  std::vector<TensorInfo> out;
  out.reserve(by_offset.size());
  for (auto& [begin, t] : by_offset)
    out.push_back(std::move(t));
  return out;
}

Expected<std::vector<TensorInfo>> read_safetensors_header(const fs::path& file) {
  const std::string where = file.string();
  std::error_code ec;
  const uint64_t size = fs::file_size(file, ec);
  if (ec) return fail(ErrorKind::io, fmt::format("{}: {}", where, ec.message()));
  std::ifstream in(file, std::ios::binary);
  if (!in) return fail(ErrorKind::io, fmt::format("{}: cannot open", where));
  std::array<uint8_t, 8> len_bytes{};
  if (size < 8 || !in.read(reinterpret_cast<char*>(len_bytes.data()), 8)) {
    return bad(fmt::format("{}: file is too short for a safetensors header", where));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | len_bytes[static_cast<size_t>(i)];
  // Bound the read before allocating; parse_safetensors_header words the error.
  if (n == 0 || n > k_max_safetensors_header_bytes || n > size - 8) {
    auto r = parse_safetensors_header(len_bytes, size);
    return std::unexpected(r.error().with_context(where));
  }
  std::vector<uint8_t> prefix(8 + n);
  std::copy(len_bytes.begin(), len_bytes.end(), prefix.begin());
  if (!in.read(reinterpret_cast<char*>(prefix.data() + 8), static_cast<std::streamsize>(n))) {
    return fail(ErrorKind::io, fmt::format("{}: short read of the safetensors header", where));
  }
  auto tensors = parse_safetensors_header(prefix, size);
  if (!tensors) return std::unexpected(tensors.error().with_context(where));
  return tensors;
}

Expected<ShardMap> parse_safetensors_index(std::string_view text, std::string_view where) {
  if (text.size() > k_max_safetensors_index_bytes)
    return bad(fmt::format("{}: index larger than 64 MiB", where));
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return bad(fmt::format("{}: not a JSON object", where));
  const auto map = doc.find("weight_map");
  if (map == doc.end() || !map->is_object())
    return bad(fmt::format("{}: no weight_map object", where));

  ShardMap shards;
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string())
      return bad(fmt::format("{}: weight_map['{}'] is not a file name", where, name));
    const auto shard = file.get<std::string>();
    const fs::path p(shard);
    if (shard.empty() || shard.size() > 255 || p.is_absolute() || p.has_parent_path() ||
        shard == ".." || shard == "." || shard.find('\0') != std::string::npos) {
      return bad(
          fmt::format("{}: shard '{}' is not a file name in the model folder", where, shard));
    }
    shards[shard].push_back(name);
    if (shards.size() > k_max_shards) {
      return bad(fmt::format("{}: more than {} shards", where, k_max_shards));
    }
  }
  return shards;
}

Expected<std::vector<TensorInfo>> join_shards(
    const ShardMap& index, std::vector<std::pair<std::string, std::vector<TensorInfo>>> shards,
    std::string_view where) {
  std::vector<TensorInfo> out;
  std::set<std::string> seen;
  for (auto& [shard, tensors] : shards) {
    std::set<std::string> in_shard;
    for (auto& t : tensors) {
      in_shard.insert(t.name);
      if (!seen.insert(t.name).second) {
        return bad(fmt::format("{}: tensor '{}' appears in more than one shard", where, t.name));
      }
      out.push_back(std::move(t));
    }
    const auto expected = index.find(shard);
    if (expected == index.end()) continue;
    for (const auto& name : expected->second) {
      if (!in_shard.contains(name)) {
        return bad(
            fmt::format("{}: weight_map puts '{}' in {}, which lacks it", where, name, shard));
      }
    }
  }
  return out;
}

namespace {

Expected<std::vector<TensorInfo>> read_indexed_folder(const fs::path& folder,
                                                      const fs::path& index) {
  const std::string where = index.string();
  std::error_code ec;
  const uint64_t size = fs::file_size(index, ec);
  if (ec) return fail(ErrorKind::io, fmt::format("{}: {}", where, ec.message()));
  if (size > k_max_safetensors_index_bytes)
    return bad(fmt::format("{}: index larger than 64 MiB", where));
  std::ifstream in(index, std::ios::binary);
  std::string text(size, '\0');
  if (!in || !in.read(text.data(), static_cast<std::streamsize>(size))) {
    return fail(ErrorKind::io, fmt::format("{}: cannot read", where));
  }
  auto shards = parse_safetensors_index(text, where);
  if (!shards) return std::unexpected(shards.error());
  std::vector<std::pair<std::string, std::vector<TensorInfo>>> read;
  for (const auto& [shard, expected] : *shards) {
    const fs::path path = folder / shard;
    if (!fs::exists(path, ec)) {
      return fail(ErrorKind::not_found, fmt::format("{}: shard '{}' is missing", where, shard));
    }
    auto tensors = read_safetensors_header(path);
    if (!tensors) return std::unexpected(tensors.error());
    read.emplace_back(shard, std::move(*tensors));
  }
  return join_shards(*shards, std::move(read), where);
}

}  // namespace

Expected<std::vector<TensorInfo>> read_safetensors_folder(const fs::path& folder) {
  std::error_code ec;
  const fs::path index = folder / "model.safetensors.index.json";
  if (fs::is_regular_file(index, ec)) return read_indexed_folder(folder, index);
  const fs::path single = folder / "model.safetensors";
  if (fs::is_regular_file(single, ec)) return read_safetensors_header(single);
  // Other layouts (consolidated.safetensors, unindexed shards): every .safetensors file.
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    if (e.is_regular_file(ec) && e.path().extension() == ".safetensors") files.push_back(e.path());
  }
  if (ec) return fail(ErrorKind::io, fmt::format("{}: {}", folder.string(), ec.message()));
  if (files.empty()) {
    return fail(
        ErrorKind::not_found,
        fmt::format("{}: no model.safetensors, index or .safetensors files", folder.string()));
  }
  std::sort(files.begin(), files.end());
  std::vector<TensorInfo> out;
  std::set<std::string> seen;
  for (const auto& f : files) {
    auto tensors = read_safetensors_header(f);
    if (!tensors) return std::unexpected(tensors.error());
    for (auto& t : *tensors) {
      if (!seen.insert(t.name).second) {
        return bad(
            fmt::format("{}: tensor '{}' appears in more than one file", folder.string(), t.name));
      }
      out.push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace kvprof::model
