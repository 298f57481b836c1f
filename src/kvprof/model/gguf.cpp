// GGUF header parser: magic, version, metadata key/values (all value types, nested arrays) and
// tensor infos, with every count and length bounded by the bytes left in the file before
// anything is allocated; and read_gguf(), which reads only as much of the file as the header needs.
#include "kvprof/model/gguf.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <numeric>
#include <unordered_set>

namespace kvprof::model {

static_assert(std::endian::native == std::endian::little,
              "GGUF reader assumes a little-endian host");

std::optional<uint64_t> GgufValue::as_uint() const {
  if (const auto* u = std::get_if<uint64_t>(&value)) return *u;
  if (const auto* i = std::get_if<int64_t>(&value); i != nullptr && *i >= 0) {
    return static_cast<uint64_t>(*i);
  }
  return std::nullopt;
}

const std::string* GgufValue::as_string() const {
  return std::get_if<std::string>(&value);
}

std::span<const GgufValue> GgufValue::elements() const {
  if (const auto* v = std::get_if<std::vector<GgufValue>>(&value)) return *v;
  return {};
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

std::optional<uint64_t> GgufFile::array_length(const std::string& key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || !v->is_array()) return std::nullopt;
  return v->array_length;
}

namespace {

constexpr uint64_t k_max_name_bytes = 65536;     // keys and tensor names
constexpr int k_max_array_depth = 8;             // nested arrays
constexpr uint64_t k_max_kept_values = 1 << 20;  // array elements kept over the whole file
constexpr uint64_t k_max_alignment = 1ULL << 30;

// Smallest encoding of one value of `type` (a string is at least its length, an array its
// element type and count), used to bound declared counts by the bytes left.
uint64_t min_value_bytes(GgufType type) {
  switch (type) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean:
      return 1;
    case GgufType::u16:
    case GgufType::i16:
      return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32:
      return 4;
    case GgufType::u64:
    case GgufType::i64:
    case GgufType::f64:
    case GgufType::string:
      return 8;
    case GgufType::array:
      return 12;
  }
  return 1;
}

bool is_fixed_size(GgufType type) {
  return type != GgufType::string && type != GgufType::array;
}

class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, uint64_t file_size)
      : m_data(bytes.data()),
        m_avail(std::min<uint64_t>(bytes.size(), file_size)),
        m_file_size(file_size) {}

  // True when the last failure was running out of the prefix while the file goes on.
  [[nodiscard]] bool needs_more() const { return m_needs_more; }

  Expected<GgufFile> parse();

 private:
  [[nodiscard]] uint64_t file_left() const { return m_file_size - m_pos; }

  std::unexpected<Error> bad(std::string message) const {
    return fail(ErrorKind::input, "GGUF: " + message);
  }
  // The error for needing `n` more bytes at the cursor while reading `what`.
  std::unexpected<Error> truncated(std::string_view what) {
    if (m_avail < m_file_size) m_needs_more = true;
    return bad(fmt::format("file truncated at byte {} while reading {} (file is {} bytes)", m_pos,
                           what, m_file_size));
  }

  bool take(uint64_t n, const uint8_t*& out) {
    if (n > m_avail - m_pos) return false;
    out = m_data + m_pos;
    m_pos += n;
    return true;
  }
  template <class T>
  bool read(T& v) {
    const uint8_t* p = nullptr;
    if (!take(sizeof(T), p)) return false;
    std::memcpy(&v, p, sizeof(T));
    return true;
  }

  // Reads a length-prefixed string; `what` and `key` name it in errors ("<what> '<key>'").
  Expected<std::string> read_string(std::string_view what, std::string_view key, uint64_t max_bytes,
                                    bool keep = true);
  Expected<GgufType> read_type(std::string_view label, std::string_view key);
  Expected<GgufValue> read_value(GgufType type, std::string_view key, int depth, bool keep);
  Expected<GgufValue> read_array(std::string_view key, int depth, bool keep);
  Expected<void> read_tensor_info(GgufFile& out, uint64_t index);
  Expected<void> check_tensor_layout(GgufFile& out);

  const uint8_t* m_data;
  uint64_t m_avail;
  uint64_t m_file_size;
  uint64_t m_pos = 0;
  uint64_t m_kept_values = 0;
  bool m_needs_more = false;
};

Expected<std::string> Parser::read_string(std::string_view label, std::string_view key,
                                          uint64_t max_bytes, bool keep) {
  const auto what = [&] {
    return key.empty() ? std::string(label) : fmt::format("{} '{}'", label, key);
  };
  uint64_t len = 0;
  if (!read(len)) return truncated(what());
  if (len > file_left()) {
    return bad(fmt::format("{} at byte {} declares {} bytes but only {} remain in the file", what(),
                           m_pos - 8, len, file_left()));
  }
  if (len > max_bytes) return bad(fmt::format("{} is {} bytes (limit {})", what(), len, max_bytes));
  const uint8_t* p = nullptr;
  if (!take(len, p)) return truncated(what());
  if (!keep) return std::string();
  return std::string(reinterpret_cast<const char*>(p), len);
}

Expected<GgufType> Parser::read_type(std::string_view label, std::string_view key) {
  uint32_t raw = 0;
  if (!read(raw)) return truncated(fmt::format("{} '{}'", label, key));
  if (raw > static_cast<uint32_t>(GgufType::f64)) {
    return bad(fmt::format("{} '{}': unknown value type {}", label, key, raw));
  }
  return static_cast<GgufType>(raw);
}

Expected<GgufValue> Parser::read_value(GgufType type, std::string_view key, int depth, bool keep) {
  GgufValue v;
  v.type = type;
  const auto scalar = [&]<class T>(T raw) -> bool {
    if (!read(raw)) return false;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      v.value = static_cast<double>(raw);
    } else if constexpr (std::is_signed_v<T>) {
      v.value = static_cast<int64_t>(raw);
    } else {
      v.value = static_cast<uint64_t>(raw);
    }
    return true;
  };
  bool ok = true;
  switch (type) {
    case GgufType::u8:
      ok = scalar(uint8_t{});
      break;
    case GgufType::i8:
      ok = scalar(int8_t{});
      break;
    case GgufType::u16:
      ok = scalar(uint16_t{});
      break;
    case GgufType::i16:
      ok = scalar(int16_t{});
      break;
    case GgufType::u32:
      ok = scalar(uint32_t{});
      break;
    case GgufType::i32:
      ok = scalar(int32_t{});
      break;
    case GgufType::u64:
      ok = scalar(uint64_t{});
      break;
    case GgufType::i64:
      ok = scalar(int64_t{});
      break;
    case GgufType::f32:
      ok = scalar(float{});
      break;
    case GgufType::f64:
      ok = scalar(double{});
      break;
    case GgufType::boolean: {
      uint8_t b = 0;
      ok = read(b);
      v.value = b != 0;
      break;
    }
    case GgufType::string: {
      auto s = read_string("string value of", key, UINT64_MAX, keep);
      if (!s) return std::unexpected(s.error());
      if (keep) v.value = std::move(*s);
      break;
    }
    case GgufType::array:
      return read_array(key, depth, keep);
  }
  if (!ok) return truncated(fmt::format("value of '{}'", key));
  return v;
}

Expected<GgufValue> Parser::read_array(std::string_view key, int depth, bool keep) {
  if (depth >= k_max_array_depth) {
    return bad(fmt::format("'{}': arrays nested deeper than {}", key, k_max_array_depth));
  }
  auto elem_type = read_type("array type of", key);
  if (!elem_type) return std::unexpected(elem_type.error());
  uint64_t count = 0;
  if (!read(count)) return truncated(fmt::format("array length of '{}'", key));
  if (count > file_left() / min_value_bytes(*elem_type)) {
    return bad(fmt::format("'{}': array of {} elements does not fit in the {} bytes left", key,
                           count, file_left()));
  }
  GgufValue v;
  v.type = GgufType::array;
  v.array_type = *elem_type;
  v.array_length = count;
  const uint64_t limit = is_fixed_size(*elem_type) ? k_gguf_kept_numbers : k_gguf_kept_strings;
  std::vector<GgufValue> kept;
  uint64_t n_keep = keep ? std::min({count, limit, k_max_kept_values - m_kept_values}) : 0;
  kept.reserve(n_keep);
  m_kept_values += n_keep;
  for (uint64_t i = 0; i < n_keep; ++i) {
    auto e = read_value(*elem_type, key, depth + 1, true);
    if (!e) return std::unexpected(e.error());
    kept.push_back(std::move(*e));
  }
  const uint64_t rest = count - n_keep;
  if (is_fixed_size(*elem_type)) {
    const uint8_t* p = nullptr;  // fixed-size elements past the kept ones: skip in one step
    if (!take(rest * min_value_bytes(*elem_type), p)) {
      return truncated(fmt::format("array '{}'", key));
    }
  } else {
    for (uint64_t i = 0; i < rest; ++i) {
      auto e = read_value(*elem_type, key, depth + 1, false);
      if (!e) return std::unexpected(e.error());
    }
  }
  v.value = std::move(kept);
  return v;
}

Expected<void> Parser::read_tensor_info(GgufFile& out, uint64_t index) {
  auto name = read_string(fmt::format("name of tensor {}", index), "", k_max_name_bytes);
  if (!name) return std::unexpected(name.error());
  uint32_t n_dims = 0;
  if (!read(n_dims)) return truncated(fmt::format("tensor '{}'", *name));
  if (n_dims == 0 || n_dims > k_max_gguf_dims) {
    return bad(fmt::format("tensor '{}' has {} dimensions (1 to {} allowed)", *name, n_dims,
                           k_max_gguf_dims));
  }
  TensorInfo t;
  t.name = std::move(*name);
  uint64_t n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t dim = 0;
    if (!read(dim)) return truncated(fmt::format("dimensions of tensor '{}'", t.name));
    if (dim == 0 || dim > uint64_t{INT64_MAX}) {
      return bad(fmt::format("tensor '{}': dimension {} is {}", t.name, d, dim));
    }
    if (__builtin_mul_overflow(n_elements, dim, &n_elements) || n_elements > uint64_t{INT64_MAX}) {
      return bad(fmt::format("tensor '{}': element count overflows", t.name));
    }
    t.shape.push_back(dim);
  }
  uint32_t type = 0;
  uint64_t offset = 0;
  if (!read(type) || !read(offset)) return truncated(fmt::format("tensor '{}'", t.name));
  const auto block = ggml_block(type);
  if (!block) return bad(fmt::format("tensor '{}' has unknown ggml type {}", t.name, type));
  t.type_name = *ggml_type_name(type);
  if (t.shape[0] % block->block_elements != 0) {
    return bad(fmt::format("tensor '{}': rows of {} elements are not whole {} blocks of {}", t.name,
                           t.shape[0], t.type_name, block->block_elements));
  }
  const auto bytes = ggml_tensor_bytes(type, n_elements);
  if (!bytes) return bad(fmt::format("tensor '{}': size overflows", t.name));
  t.bytes = *bytes;
  if (offset % out.alignment != 0) {
    return bad(fmt::format("tensor '{}': data offset {} is not a multiple of the alignment {}",
                           t.name, offset, out.alignment));
  }
  out.tensors.push_back(std::move(t));
  out.tensor_types.push_back(type);
  out.tensor_offsets.push_back(offset);
  return {};
}

Expected<void> Parser::check_tensor_layout(GgufFile& out) {
  std::unordered_set<std::string_view> names;
  for (const auto& t : out.tensors) {
    if (!names.insert(t.name).second) return bad(fmt::format("duplicate tensor '{}'", t.name));
  }
  if (out.tensors.empty()) return {};
  if (out.data_offset > m_file_size) {
    return bad(fmt::format("tensor data would start at byte {} past the end of the file ({} bytes)",
                           out.data_offset, m_file_size));
  }
  const uint64_t data_bytes = m_file_size - out.data_offset;
  for (size_t i = 0; i < out.tensors.size(); ++i) {
    const uint64_t off = out.tensor_offsets[i];
    if (off > data_bytes || out.tensors[i].bytes > data_bytes - off) {
      return bad(
          fmt::format("tensor '{}' ({} bytes at data offset {}) extends past the end of the "
                      "file ({} bytes)",
                      out.tensors[i].name, out.tensors[i].bytes, off, m_file_size));
    }
  }
  std::vector<size_t> order(out.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return out.tensor_offsets[a] < out.tensor_offsets[b]; });
  for (size_t k = 1; k < order.size(); ++k) {
    const size_t prev = order[k - 1];
    const size_t cur = order[k];
    if (out.tensor_offsets[prev] + out.tensors[prev].bytes > out.tensor_offsets[cur]) {
      return bad(fmt::format("tensors '{}' and '{}' overlap", out.tensors[prev].name,
                             out.tensors[cur].name));
    }
  }
  return {};
}

Expected<GgufFile> Parser::parse() {
  GgufFile out;
  const uint8_t* magic = nullptr;
  if (!take(4, magic)) return truncated("the magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    std::string shown;
    for (int i = 0; i < 4; ++i) {
      shown += (magic[i] >= 0x20 && magic[i] < 0x7f) ? static_cast<char>(magic[i]) : '?';
    }
    return bad(fmt::format("not a GGUF file (magic '{}', expected 'GGUF')", shown));
  }
  if (!read(out.version)) return truncated("the version");
  if (out.version == 1) {
    return bad("version 1 files are not supported (re-convert the model with a current llama.cpp)");
  }
  if ((out.version & 0xffffu) == 0 && (out.version >> 24) >= 1 && (out.version >> 24) <= 3) {
    return bad("big-endian GGUF files are not supported");
  }
  if (out.version != 2 && out.version != 3) {
    return bad(fmt::format("unsupported version {} (2 and 3 are supported)", out.version));
  }
  uint64_t n_tensors = 0;
  uint64_t n_kv = 0;
  if (!read(n_tensors)) return truncated("the tensor count");
  if (!read(n_kv)) return truncated("the key/value count");
  if (n_tensors > k_max_gguf_tensors || n_tensors > file_left() / 32) {
    return bad(fmt::format("tensor count {} is implausible for a {}-byte file (limit {})",
                           n_tensors, m_file_size, k_max_gguf_tensors));
  }
  if (n_kv > k_max_gguf_kvs || n_kv > file_left() / 13) {
    return bad(fmt::format("key/value count {} is implausible for a {}-byte file (limit {})", n_kv,
                           m_file_size, k_max_gguf_kvs));
  }

  for (uint64_t i = 0; i < n_kv; ++i) {
    auto key = read_string(fmt::format("key {}", i), "", k_max_name_bytes);
    if (!key) return std::unexpected(key.error());
    if (key->empty()) return bad(fmt::format("key {} is empty", i));
    if (out.metadata.contains(*key)) return bad(fmt::format("duplicate key '{}'", *key));
    auto type = read_type("type of", *key);
    if (!type) return std::unexpected(type.error());
    auto value = read_value(*type, *key, 0, true);
    if (!value) return std::unexpected(value.error());
    if (*key == "general.alignment") {
      const auto a = value->is_array() ? std::nullopt : value->as_uint();
      if (!a || *a == 0 || !std::has_single_bit(*a) || *a > k_max_alignment) {
        return bad("general.alignment must be a power of two integer");
      }
      out.alignment = *a;
    }
    out.metadata.emplace(std::move(*key), std::move(*value));
  }

  out.tensors.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    auto ok = read_tensor_info(out, i);
    if (!ok) return std::unexpected(ok.error());
  }
  out.data_offset = (m_pos + out.alignment - 1) / out.alignment * out.alignment;
  auto layout = check_tensor_layout(out);
  if (!layout) return std::unexpected(layout.error());
  return out;
}

}  // namespace

Expected<GgufFile> parse_gguf(std::span<const uint8_t> bytes, uint64_t file_size) {
  return Parser(bytes, file_size).parse();
}

Expected<GgufFile> read_gguf(const std::filesystem::path& file) {
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec || !std::filesystem::exists(status)) {
    return fail(ErrorKind::not_found, fmt::format("{}: no such file", file.string()));
  }
  if (std::filesystem::is_directory(status)) {
    return fail(ErrorKind::input,
                fmt::format("{}: is a directory, not a .gguf file", file.string()));
  }
  const uint64_t file_size = std::filesystem::file_size(file, ec);
  if (ec) return fail(ErrorKind::io, fmt::format("{}: {}", file.string(), ec.message()));
  std::ifstream in(file, std::ios::binary);
  if (!in) return fail(ErrorKind::io, fmt::format("{}: cannot open for reading", file.string()));

  const uint64_t cap = std::min(file_size, k_max_gguf_header_bytes);
  std::vector<uint8_t> buffer;
  uint64_t want = std::min<uint64_t>(cap, 1 << 20);
  while (true) {
    const uint64_t have = buffer.size();
    buffer.resize(want);
    in.read(reinterpret_cast<char*>(buffer.data() + have),
            static_cast<std::streamsize>(want - have));
    if (static_cast<uint64_t>(in.gcount()) != want - have) {
      return fail(ErrorKind::io, fmt::format("{}: read failed at byte {}", file.string(),
                                             have + static_cast<uint64_t>(in.gcount())));
    }
    Parser parser(buffer, file_size);
    auto result = parser.parse();
    if (result || !parser.needs_more()) {
      if (!result) return std::unexpected(result.error().with_context(file.string()));
      return result;
    }
    if (want >= cap) {
      return fail(ErrorKind::input, fmt::format("{}: GGUF header is larger than {} MiB",
                                                file.string(), k_max_gguf_header_bytes >> 20));
    }
    want = std::min(cap, want * 2);
  }
}

}  // namespace kvprof::model
