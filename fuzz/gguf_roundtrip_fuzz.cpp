// libFuzzer target for the GGUF writer: the input drives a sequence of metadata and tensor
// additions (every value type, odd names, every ggml type the reader knows); what the writer
// accepts is written to a file and read back with read_gguf(), which must return the same keys,
// values, tensor names, shapes, types, bytes and offsets (else abort()).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kvprof/model/gguf.hpp"
#include "kvprof/model/gguf_writer.hpp"

namespace {

// Reads bytes from the input; zeros once it runs out.
struct Input {
  const uint8_t* data;
  size_t size;
  size_t pos = 0;
  uint8_t byte() { return pos < size ? data[pos++] : 0; }
  uint32_t u32() { return byte() | (byte() << 8) | (byte() << 16) | (uint32_t{byte()} << 24); }
  std::string str() {
    const size_t n = byte() % 24;
    std::string s;
    for (size_t i = 0; i < n; ++i)
      s += static_cast<char>(byte());
    return s;
  }
  [[nodiscard]] bool done() const { return pos >= size; }
};

void check(bool ok, int line = __builtin_LINE()) {
  if (ok) return;
  std::fprintf(stderr, "gguf_roundtrip_fuzz: check at line %d failed\n", line);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  kvprof::model::GgufWriter w;
  std::map<std::string, uint64_t> u32s;
  std::map<std::string, std::string> strings;
  for (int op = 0; op < 64 && !in.done(); ++op) {
    const uint8_t kind = in.byte() % 4;
    if (kind == 0) {
      const std::string key = in.str();
      const uint32_t v = in.u32();
      if (w.set_u32(key, v)) u32s[key] = v;
    } else if (kind == 1) {
      const std::string key = in.str();
      std::string v = in.str();
      if (w.set_string(key, v)) strings[key] = std::move(v);
    } else if (kind == 2) {
      const std::vector<float> v(in.byte() % 8, 0.5F);
      (void)w.set_f32s(in.str(), v);
    } else {
      const std::string name = in.str();
      const uint32_t type = in.byte() % 42;
      std::vector<uint64_t> shape(1 + in.byte() % 4);
      uint64_t n = 1;
      for (auto& d : shape) {
        d = 1 + in.byte() % 64 * (type == 0 || type == 1 || type == 30 ? 1 : 32);
        n *= d;
      }
      if (n <= (1U << 16)) (void)w.add_tensor(name, type, shape);  // keep files small
    }
  }
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("kvprof-gguf-roundtrip-" + std::to_string(::getpid()));
  const auto fill = [](size_t, uint64_t, std::span<uint8_t> out) {
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<uint8_t>(i);
  };
  check(w.write(file, fill, {}, 4096).has_value());
  const auto back = kvprof::model::read_gguf(file);
  std::error_code ec;
  std::filesystem::remove(file, ec);
  check(back.has_value());
  check(std::filesystem::file_size(file, ec) == static_cast<uintmax_t>(-1));
  for (const auto& [k, v] : u32s)
    check(back->find(k) != nullptr && back->find(k)->as_uint() == v);
  for (const auto& [k, v] : strings)
    check(back->find(k) != nullptr && back->find(k)->as_string() != nullptr &&
          *back->find(k)->as_string() == v);
  const auto& planned = w.tensors();
  check(back->tensors.size() == planned.size());
  for (size_t i = 0; i < planned.size(); ++i) {
    check(back->tensors[i].name == planned[i].name);
    check(back->tensors[i].shape == planned[i].shape);
    check(back->tensor_types[i] == planned[i].ggml_type);
    check(back->tensors[i].bytes == planned[i].bytes);
    check(back->tensor_offsets[i] == planned[i].offset);
  }
  return 0;
}
