// GGUF v3 writer: encodes metadata and tensor infos in memory (small), then streams tensor data
// chunk by chunk from the fill function into a temporary file renamed into place at the end.
#include "kvprof/model/gguf_writer.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "kvprof/model/gguf.hpp"

namespace kvprof::model {

static_assert(std::endian::native == std::endian::little,
              "GGUF writer assumes a little-endian host");

namespace {

constexpr uint32_t k_gguf_version = 3;
constexpr size_t k_max_tensor_name_bytes = 63;  // GGML_MAX_NAME - 1
constexpr std::string_view k_alignment_key = "general.alignment";

uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};

}  // namespace

template <class T>
void GgufWriter::put_raw(const T& v) {
  uint8_t raw[sizeof(T)];
  std::memcpy(raw, &v, sizeof(T));
  m_kv.insert(m_kv.end(), raw, raw + sizeof(T));
}

void GgufWriter::put_u32(uint32_t v) {
  put_raw(v);
}
void GgufWriter::put_u64(uint64_t v) {
  put_raw(v);
}
void GgufWriter::put_str(std::string_view s) {
  put_u64(s.size());
  m_kv.insert(m_kv.end(), s.begin(), s.end());
}

GgufWriter::GgufWriter(uint32_t alignment_bytes) : m_alignment_bytes(alignment_bytes) {
  if (alignment_bytes == 32) return;
  m_keys.insert(std::string(k_alignment_key));
  put_str(k_alignment_key);
  put_u32(static_cast<uint32_t>(GgufType::u32));
  put_raw(alignment_bytes);
  ++m_n_kv;
}

Expected<void> GgufWriter::begin_key(std::string_view key, uint32_t type) {
  if (key.empty()) return fail(ErrorKind::input, "GGUF writer: empty metadata key");
  if (key == k_alignment_key) {
    return fail(ErrorKind::input,
                fmt::format("GGUF writer: {} is set by the writer (it aligns tensor data to {} "
                            "bytes)",
                            k_alignment_key, m_alignment_bytes));
  }
  if (!m_keys.insert(std::string(key)).second) {
    return fail(ErrorKind::input, fmt::format("GGUF writer: metadata key '{}' set twice", key));
  }
  put_str(key);
  put_u32(type);
  ++m_n_kv;
  return {};
}

Expected<void> GgufWriter::set_string(std::string_view key, std::string_view value) {
  auto ok = begin_key(key, static_cast<uint32_t>(GgufType::string));
  if (ok) put_str(value);
  return ok;
}
Expected<void> GgufWriter::set_u32(std::string_view key, uint32_t value) {
  auto ok = begin_key(key, static_cast<uint32_t>(GgufType::u32));
  if (ok) put_raw(value);
  return ok;
}
Expected<void> GgufWriter::set_i32(std::string_view key, int32_t value) {
  auto ok = begin_key(key, static_cast<uint32_t>(GgufType::i32));
  if (ok) put_raw(value);
  return ok;
}
Expected<void> GgufWriter::set_u64(std::string_view key, uint64_t value) {
  auto ok = begin_key(key, static_cast<uint32_t>(GgufType::u64));
  if (ok) put_raw(value);
  return ok;
}
Expected<void> GgufWriter::set_f32(std::string_view key, float value) {
  auto ok = begin_key(key, static_cast<uint32_t>(GgufType::f32));
  if (ok) put_raw(value);
  return ok;
}
Expected<void> GgufWriter::set_bool(std::string_view key, bool value) {
  auto ok = begin_key(key, static_cast<uint32_t>(GgufType::boolean));
  if (ok) put_raw(static_cast<uint8_t>(value ? 1 : 0));
  return ok;
}

Expected<void> GgufWriter::set_strings(std::string_view key, std::span<const std::string> values) {
  auto ok = begin_key(key, static_cast<uint32_t>(GgufType::array));
  if (!ok) return ok;
  put_u32(static_cast<uint32_t>(GgufType::string));
  put_u64(values.size());
  for (const auto& s : values)
    put_str(s);
  return ok;
}

Expected<void> GgufWriter::set_f32s(std::string_view key, std::span<const float> values) {
  auto ok = begin_key(key, static_cast<uint32_t>(GgufType::array));
  if (!ok) return ok;
  put_u32(static_cast<uint32_t>(GgufType::f32));
  put_u64(values.size());
  for (float v : values)
    put_raw(v);
  return ok;
}

Expected<void> GgufWriter::set_i32s(std::string_view key, std::span<const int32_t> values) {
  auto ok = begin_key(key, static_cast<uint32_t>(GgufType::array));
  if (!ok) return ok;
  put_u32(static_cast<uint32_t>(GgufType::i32));
  put_u64(values.size());
  for (int32_t v : values)
    put_raw(v);
  return ok;
}

Expected<void> GgufWriter::set_u32s(std::string_view key, std::span<const uint32_t> values) {
  auto ok = begin_key(key, static_cast<uint32_t>(GgufType::array));
  if (!ok) return ok;
  put_u32(static_cast<uint32_t>(GgufType::u32));
  put_u64(values.size());
  for (uint32_t v : values)
    put_raw(v);
  return ok;
}

Expected<void> GgufWriter::set_bools(std::string_view key, std::span<const bool> values) {
  auto ok = begin_key(key, static_cast<uint32_t>(GgufType::array));
  if (!ok) return ok;
  put_u32(static_cast<uint32_t>(GgufType::boolean));
  put_u64(values.size());
  for (bool v : values)
    put_raw(static_cast<uint8_t>(v ? 1 : 0));
  return ok;
}

Expected<void> GgufWriter::add_tensor(std::string name, uint32_t ggml_type,
                                      std::vector<uint64_t> shape) {
  if (name.empty() || name.size() > k_max_tensor_name_bytes) {
    return fail(ErrorKind::input,
                fmt::format("GGUF writer: tensor name '{}' must have 1 to {} bytes", name,
                            k_max_tensor_name_bytes));
  }
  if (shape.empty() || shape.size() > k_max_gguf_dims) {
    return fail(ErrorKind::input,
                fmt::format("GGUF writer: tensor '{}' has {} dims (1 to 4)", name, shape.size()));
  }
  const auto block = ggml_block(ggml_type);
  if (!block) {
    return fail(ErrorKind::input,
                fmt::format("GGUF writer: tensor '{}' has unknown ggml type {}", name, ggml_type));
  }
  if (shape[0] % block->block_elements != 0) {
    return fail(
        ErrorKind::input,
        fmt::format("GGUF writer: tensor '{}' rows of {} are not whole {} blocks of {}", name,
                    shape[0], ggml_type_name(ggml_type).value_or("?"), block->block_elements));
  }
  uint64_t n = 1;
  for (uint64_t d : shape) {
    if (d == 0)
      return fail(ErrorKind::input, fmt::format("GGUF writer: tensor '{}' is empty", name));
    n *= d;
  }
  if (m_tensor_names.contains(name)) {
    return fail(ErrorKind::input, fmt::format("GGUF writer: tensor '{}' added twice", name));
  }
  GgufTensorPlan t;
  t.bytes = *ggml_tensor_bytes(ggml_type, n);
  t.offset = align_up(m_data_bytes, m_alignment_bytes);
  m_data_bytes = t.offset + t.bytes;
  t.name = std::move(name);
  t.ggml_type = ggml_type;
  t.shape = std::move(shape);
  m_tensor_names.insert(t.name);
  m_tensors.push_back(std::move(t));
  return {};
}

uint64_t GgufWriter::file_bytes() const {
  uint64_t header = 4 + 4 + 8 + 8 + m_kv.size();
  for (const auto& t : m_tensors)
    header += 8 + t.name.size() + 4 + 8 * t.shape.size() + 4 + 8;
  return align_up(header, m_alignment_bytes) + m_data_bytes;
}

Expected<void> GgufWriter::write(const std::filesystem::path& path, const GgufFillFn& fill,
                                 const GgufProgressFn& progress, uint64_t chunk_bytes) const {
  // Header: magic, version, counts, metadata, tensor infos, padding to the data section.
  std::vector<uint8_t> head;
  const auto put = [&head](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    head.insert(head.end(), b, b + n);
  };
  const auto put64 = [&put](uint64_t v) { put(&v, 8); };
  const auto put32 = [&put](uint32_t v) { put(&v, 4); };
  put("GGUF", 4);
  put32(k_gguf_version);
  put64(m_tensors.size());
  put64(m_n_kv);
  head.insert(head.end(), m_kv.begin(), m_kv.end());
  for (const auto& t : m_tensors) {
    put64(t.name.size());
    put(t.name.data(), t.name.size());
    put32(static_cast<uint32_t>(t.shape.size()));
    for (uint64_t d : t.shape)
      put64(d);
    put32(t.ggml_type);
    put64(t.offset);
  }
  head.resize(align_up(head.size(), m_alignment_bytes), 0);

  // The file is renamed into place: an existing device or pipe (-o /dev/null) would be replaced.
  std::error_code st_ec;
  const auto st = std::filesystem::status(path, st_ec);
  if (!st_ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    return fail(ErrorKind::usage,
                fmt::format("cannot write '{}': it exists and is not a regular file (a GGUF is "
                            "written to a new file and renamed into place)",
                            path.string()));
  }
  const std::filesystem::path tmp = path.string() + fmt::format(".tmp.{}", ::getpid());
  const auto io_error = [&](std::string_view what, int err) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return fail(ErrorKind::io,
                fmt::format("cannot write '{}': {}{}", path.string(), what,
                            err != 0 ? fmt::format(": {}", std::strerror(err)) : std::string()));
  };
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(tmp.c_str(), "wb"));
  if (!file) {
    const int err = errno;
    return fail(ErrorKind::io,
                fmt::format("cannot write '{}': {}", path.string(), std::strerror(err)));
  }
  const auto write_all = [&](const void* p, size_t n) {
    return std::fwrite(p, 1, n, file.get()) == n;
  };
  if (!write_all(head.data(), head.size())) return io_error("header", errno);

  std::vector<uint8_t> buf;
  uint64_t written = 0;
  static const uint8_t k_zeros[64] = {};
  for (size_t i = 0; i < m_tensors.size(); ++i) {
    const GgufTensorPlan& t = m_tensors[i];
    if (t.offset > written) {
      if (!write_all(k_zeros, t.offset - written)) return io_error("padding", errno);
      written = t.offset;
    }
    const auto block = *ggml_block(t.ggml_type);
    const uint64_t step =
        std::max<uint64_t>(1, chunk_bytes / block.block_bytes) * block.block_bytes;
    for (uint64_t off = 0; off < t.bytes; off += step) {
      const uint64_t n = std::min(step, t.bytes - off);
      buf.resize(n);
      fill(i, off, std::span<uint8_t>(buf.data(), n));
      if (!write_all(buf.data(), n)) return io_error("tensor data", errno);
      written += n;
      if (progress) progress(written, m_data_bytes);
    }
  }
  std::FILE* raw = file.release();
  const bool flushed = std::fflush(raw) == 0;
  const int flush_err = errno;
  if (std::fclose(raw) != 0 || !flushed) return io_error("closing", flushed ? errno : flush_err);
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string reason = ec.message();
    std::filesystem::remove(tmp, ec);
    return fail(ErrorKind::io, fmt::format("cannot write '{}': {}", path.string(), reason));
  }
  return {};
}

}  // namespace kvprof::model
