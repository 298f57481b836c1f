// The corpus of broken GGUF files in tests/corpus/gguf/ (replayed by fuzz/gguf_fuzz.cpp too):
// every "bad_*" file must fail to parse with a one-line input error, every "ok_*" file must
// parse and build a ModelSpec. With KVPROF_WRITE_CORPUS=1 the files are (re)written first.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "kvprof/model/gguf.hpp"
#include "support/gguf_writer.hpp"

namespace kvprof::model {
namespace {

namespace fs = std::filesystem;
using test::Bytes;
using test::GgufWriter;
namespace gt = test::gguf_type;
namespace gg = test::ggml;

GgufWriter small_llama() {
  GgufWriter w;
  w.str("general.architecture", "llama").u32("llama.block_count", 1);
  w.u32("llama.embedding_length", 64).u32("llama.feed_forward_length", 128);
  w.u32("llama.attention.head_count", 4).u32("llama.attention.head_count_kv", 2);
  w.u32("llama.context_length", 4096).arr_str("tokenizer.ggml.tokens", {"<s>", "</s>", "a"});
  w.tensor("token_embd.weight", gg::Q8_0, {64, 3});
  w.tensor("blk.0.attn_norm.weight", gg::F32, {64});
  w.tensor("blk.0.attn_q.weight", gg::Q8_0, {64, 64});
  w.tensor("blk.0.ffn_down.weight", gg::Q4_0, {128, 64});
  return w;
}

std::vector<uint8_t> cut(std::vector<uint8_t> b, size_t n) {
  b.resize(std::min(n, b.size()));
  return b;
}

// Named files of the corpus.
std::map<std::string, std::vector<uint8_t>> corpus_files() {
  std::map<std::string, std::vector<uint8_t>> out;
  const auto ok = small_llama().build();
  out["ok_small_llama.gguf"] = ok;
  out["ok_metadata_only.gguf"] =
      GgufWriter(2).str("general.architecture", "mamba").u32("x.y", 1).build();
  out["bad_magic.gguf"] = small_llama().magic("GGJT").build();
  out["bad_version1.gguf"] = GgufWriter(1).build();
  out["bad_version4.gguf"] = GgufWriter(4).build();
  out["bad_big_endian.gguf"] = GgufWriter(0x03000000).build();
  out["bad_truncated_header.gguf"] = cut(ok, 20);
  out["bad_truncated_metadata.gguf"] = cut(ok, 250);
  out["bad_truncated_tensor_info.gguf"] = cut(ok, 450);
  out["bad_truncated_data.gguf"] = cut(ok, ok.size() - 1);
  out["bad_huge_tensor_count.gguf"] = small_llama().tensor_count(1ULL << 62).build();
  out["bad_huge_kv_count.gguf"] = small_llama().kv_count(UINT64_MAX).build();
  out["bad_huge_array.gguf"] =
      GgufWriter().kv("a", gt::array, Bytes{}.u32(gt::string).u64(1ULL << 61)).build();
  out["bad_string_past_eof.gguf"] =
      GgufWriter().kv("general.name", gt::string, Bytes{}.u64(1 << 20).u32(0)).build();
  out["bad_unknown_value_type.gguf"] = GgufWriter().kv("k", 13, Bytes{}.u32(0)).build();
  out["bad_unknown_array_type.gguf"] =
      GgufWriter().kv("k", gt::array, Bytes{}.u32(77).u64(1)).build();
  out["bad_unknown_ggml_type.gguf"] =
      GgufWriter().raw_tensor({"t", 36, {32}, 32, std::nullopt}).build();
  out["bad_misaligned_offset.gguf"] = GgufWriter().raw_tensor({"t", gg::F32, {8}, 32, 8}).build();
  out["bad_duplicate_key.gguf"] = GgufWriter().u32("a", 1).u32("a", 1).build();
  out["bad_duplicate_tensor.gguf"] = GgufWriter()
                                         .raw_tensor({"t", gg::F32, {8}, 32, 0})
                                         .raw_tensor({"t", gg::F32, {8}, 32, 32})
                                         .build();
  out["bad_overlapping_tensors.gguf"] = GgufWriter()
                                            .raw_tensor({"a", gg::F32, {16}, 64, 0})
                                            .raw_tensor({"b", gg::F32, {16}, 64, 32})
                                            .build();
  out["bad_dims_overflow.gguf"] =
      GgufWriter().raw_tensor({"t", gg::F32, {1ULL << 40, 1ULL << 40}, 4, std::nullopt}).build();
  out["bad_n_dims_5.gguf"] =
      GgufWriter().raw_tensor({"t", gg::F32, {1, 1, 1, 1, 1}, 4, std::nullopt}).build();
  out["bad_zero_dim.gguf"] = GgufWriter().raw_tensor({"t", gg::F32, {0}, 4, std::nullopt}).build();
  out["bad_partial_block.gguf"] =
      GgufWriter().raw_tensor({"t", gg::Q4_K, {100}, 144, std::nullopt}).build();
  out["bad_alignment_48.gguf"] = GgufWriter(3, 48).u32("general.alignment", 48).build();
  out["bad_offset_past_eof.gguf"] = GgufWriter()
                                        .raw_tensor({"a", gg::F32, {8}, 32, 0})
                                        .raw_tensor({"t", gg::F32, {8}, 32, 1ULL << 40})
                                        .build();
  Bytes deep;
  for (int i = 0; i < 64; ++i)
    deep.u32(gt::array).u64(1);
  deep.u32(gt::u8).u64(0);
  out["bad_nested_too_deep.gguf"] = GgufWriter().kv("deep", gt::array, deep).build();
  return out;
}

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(GgufCorpus, CorpusFilesFailOrParseAsNamed) {
  const fs::path dir = fs::path(KVPROF_SOURCE_DIR) / "tests" / "corpus" / "gguf";
  const auto files = corpus_files();
  if (std::getenv("KVPROF_WRITE_CORPUS") != nullptr) {
    fs::create_directories(dir);
    for (const auto& [name, bytes] : files) {
      std::ofstream(dir / name, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()),
                 static_cast<std::streamsize>(bytes.size()));
    }
  }
  // The generated files and the committed ones are checked alike.
  size_t n_bad = 0;
  std::map<std::string, std::vector<uint8_t>> all = files;
  if (fs::is_directory(dir)) {
    for (const auto& e : fs::directory_iterator(dir))
      all[e.path().filename().string()] = read_all(e.path());
  }
  for (const auto& [name, bytes] : all) {
    SCOPED_TRACE(name);
    const auto f = parse_gguf(bytes, bytes.size());
    if (name.starts_with("ok_")) {
      ASSERT_TRUE(f.has_value()) << f.error().message;
      EXPECT_TRUE(model_from_gguf(*f, name).has_value() || name == "ok_metadata_only.gguf");
    } else {
      ++n_bad;
      ASSERT_FALSE(f.has_value());
      EXPECT_EQ(f.error().kind, ErrorKind::input);
      EXPECT_EQ(f.error().message.find('\n'), std::string::npos);
      EXPECT_EQ(f.error().message.rfind("GGUF: ", 0), 0U) << f.error().message;
    }
  }
  EXPECT_GE(n_bad, 20U);
}

}  // namespace
}  // namespace kvprof::model
