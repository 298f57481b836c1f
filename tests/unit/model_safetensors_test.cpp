// safetensors header parsing: valid single files and sharded folders built in a temp dir, and
// the corpus of broken headers (tests/corpus/safetensors/), each an input error.
#include "kvprof/model/safetensors.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace kvprof::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// 8-byte little-endian length, the header text, then `data_bytes` zero bytes.
std::vector<uint8_t> make_file(const std::string& header, uint64_t data_bytes) {
  std::vector<uint8_t> out;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.resize(out.size() + data_bytes, 0);
  return out;
}

json tensor(const std::string& dtype, std::vector<uint64_t> shape, uint64_t begin, uint64_t end) {
  return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
}

Expected<std::vector<TensorInfo>> parse(const std::vector<uint8_t>& file) {
  return parse_safetensors_header(file, file.size());
}

class TempDir {
 public:
  TempDir() {
    m_path = fs::temp_directory_path() /
             ("kvprof_st_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
              "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(m_path);
    fs::create_directories(m_path);
  }
  ~TempDir() { fs::remove_all(m_path); }
  [[nodiscard]] const fs::path& path() const { return m_path; }
  void write(const std::string& name, const std::vector<uint8_t>& bytes) const {
    std::ofstream out(m_path / name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  void write_text(const std::string& name, const std::string& text) const {
    std::ofstream(m_path / name) << text;
  }

 private:
  fs::path m_path;
};

TEST(Safetensors, ParsesValidHeaderInFileOrder) {
  json h = {{"__metadata__", {{"format", "pt"}}},
            {"w.weight", tensor("BF16", {4, 8}, 12, 76)},
            {"a.bias", tensor("F32", {3}, 0, 12)},
            {"scale", tensor("F8_E4M3", {2, 2}, 76, 80)},
            {"empty", tensor("I64", {0}, 80, 80)}};
  const auto tensors = parse(make_file(h.dump(), 80));
  ASSERT_TRUE(tensors) << tensors.error().message;
  ASSERT_EQ(tensors->size(), 4U);
  EXPECT_EQ((*tensors)[0].name, "a.bias");
  EXPECT_EQ((*tensors)[0].bytes, 12U);
  EXPECT_EQ((*tensors)[1].name, "w.weight");
  EXPECT_EQ((*tensors)[1].type_name, "BF16");
  EXPECT_EQ((*tensors)[1].shape, (std::vector<uint64_t>{4, 8}));
  EXPECT_EQ((*tensors)[1].bytes, 64U);
  EXPECT_EQ((*tensors)[2].bytes, 4U);
  EXPECT_EQ((*tensors)[3].bytes, 0U);
}

TEST(Safetensors, HeaderPaddingAndPackedFp4) {
  std::string h = json{{"blocks", tensor("F4", {4, 32}, 0, 64)}}.dump();
  h.append(7, ' ');  // writers pad the header to 8-byte alignment with spaces
  const auto tensors = parse(make_file(h, 64));
  ASSERT_TRUE(tensors) << tensors.error().message;
  EXPECT_EQ(tensors->front().bytes, 64U);
}

struct BrokenCase {
  const char* name;
  std::vector<uint8_t> file;
  const char* needle;
};

TEST(Safetensors, BrokenHeadersNameTheDefect) {
  const std::vector<BrokenCase> cases{
      {"short", {0x10, 0, 0}, "too short"},
      {"zero length", make_file("", 0), "length is 0"},
      {"overlap",
       make_file(json{{"a", tensor("F32", {2}, 0, 8)}, {"b", tensor("F32", {2}, 4, 12)}}.dump(),
                 12),
       "overlap"},
      {"past eof", make_file(json{{"a", tensor("F32", {4}, 0, 16)}}.dump(), 8), "outside"},
      {"mismatch", make_file(json{{"a", tensor("F32", {3}, 0, 8)}}.dump(), 8), "needs 12"},
      {"duplicate",
       make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                 R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                 8),
       "twice"},
      {"negative dim",
       make_file(R"({"a":{"dtype":"F32","shape":[-1,4],"data_offsets":[0,16]}})", 16),
       "non-negative"},
      {"overflow",
       make_file(json{{"a", tensor("U8", {1ULL << 32, 1ULL << 32, 16}, 0, 0)}}.dump(), 0),
       "overflows"},
      {"dtype", make_file(json{{"a", tensor("F12", {1}, 0, 2)}}.dump(), 2), "unknown dtype"},
      {"array", make_file("[1,2]", 0), "object"},
      {"bad json", make_file(R"({"a": {"dtype": )", 0), "not valid JSON"},
  };
  for (const auto& c : cases) {
    const auto r = parse(c.file);
    ASSERT_FALSE(r) << c.name;
    EXPECT_EQ(r.error().kind, ErrorKind::input) << c.name;
    EXPECT_NE(r.error().message.find(c.needle), std::string::npos)
        << c.name << ": " << r.error().message;
  }
}

TEST(Safetensors, AHeaderOf100kTensorsParsesInOnePass) {
  // The JSON library's callback parser took over two minutes on this (quadratic); a linear
  // parse takes well under the suite's timeout. bench_parsers times it.
  constexpr uint64_t k_tensors = 100'000;
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  for (uint64_t i = 0; i < k_tensors; ++i) {
    header += fmt::format(
        ",\"model.layers.{}.weight\":{{\"dtype\":\"F16\",\"shape\":[4],"
        "\"data_offsets\":[{},{}]}}",
        i, i * 8, i * 8 + 8);
  }
  header += "}";
  const auto t = parse(make_file(header, k_tensors * 8));
  ASSERT_TRUE(t.has_value()) << t.error().message;
  ASSERT_EQ(t->size(), k_tensors);
  EXPECT_EQ(t->back().name, "model.layers.99999.weight");
  // A duplicate at the very end is still found.
  const std::string dup = header.substr(0, header.size() - 1) +
                          ",\"model.layers.7.weight\":{\"dtype\":\"F16\",\"shape\":[4],"
                          "\"data_offsets\":[0,8]}}";
  const auto d = parse(make_file(dup, k_tensors * 8));
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.error().message.find("names tensor 'model.layers.7.weight' twice"), std::string::npos)
      << d.error().message;
}

TEST(Safetensors, LengthBeyondFileOrLimit) {
  auto file = make_file("{}", 0);
  file[0] = 0xE8;  // 1000
  file[1] = 0x03;
  auto r = parse(file);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("exceeds the file"), std::string::npos) << r.error().message;
  for (int i = 0; i < 8; ++i)
    file[static_cast<size_t>(i)] = 0xFF;
  r = parse(file);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("limit"), std::string::npos) << r.error().message;
  // A prefix shorter than the header it announces (caller read too little).
  auto ok = make_file(json{{"a", tensor("F32", {1}, 0, 4)}}.dump(), 4);
  const auto prefix = std::span<const uint8_t>(ok).first(12);
  r = parse_safetensors_header(prefix, ok.size());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("truncated"), std::string::npos);
}

TEST(Safetensors, CorpusOfBrokenFilesAllFail) {
  const fs::path corpus = fs::path(KVPROF_SOURCE_DIR) / "tests/corpus/safetensors";
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(corpus)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    const auto r = parse(bytes);
    EXPECT_FALSE(r) << e.path().filename() << " parsed";
    if (!r) {
      EXPECT_EQ(r.error().kind, ErrorKind::input) << e.path().filename();
    }
    ++n;
  }
  EXPECT_GE(n, 15U);
}

TEST(Safetensors, ReadsOnlyTheHeaderOfALargeFile) {
  TempDir dir;
  const uint64_t data_bytes = 6ULL << 30;  // sparse: reading it would take seconds and 6 GiB
  json h = {{"big", tensor("BF16", {3ULL << 30}, 0, data_bytes)}};
  dir.write("model.safetensors", make_file(h.dump(), 0));
  const auto file = dir.path() / "model.safetensors";
  fs::resize_file(file, fs::file_size(file) + data_bytes);
  const auto tensors = read_safetensors_header(file);
  ASSERT_TRUE(tensors) << tensors.error().message;
  EXPECT_EQ(tensors->front().bytes, data_bytes);
  const auto folder = read_safetensors_folder(dir.path());
  ASSERT_TRUE(folder);
  EXPECT_EQ(folder->size(), 1U);
}

TEST(Safetensors, ShardedFolderWithIndex) {
  TempDir dir;
  dir.write(
      "model-00001-of-00002.safetensors",
      make_file(json{{"a", tensor("BF16", {2, 2}, 0, 8)}, {"b", tensor("F32", {1}, 8, 12)}}.dump(),
                12));
  dir.write("model-00002-of-00002.safetensors",
            make_file(json{{"c", tensor("I8", {5}, 0, 5)}}.dump(), 5));
  dir.write_text("model.safetensors.index.json", json{{"metadata", {{"total_size", 17}}},
                                                      {"weight_map",
                                                       {{"a", "model-00001-of-00002.safetensors"},
                                                        {"b", "model-00001-of-00002.safetensors"},
                                                        {"c", "model-00002-of-00002.safetensors"}}}}
                                                     .dump());
  const auto tensors = read_safetensors_folder(dir.path());
  ASSERT_TRUE(tensors) << tensors.error().message;
  ASSERT_EQ(tensors->size(), 3U);
  uint64_t total = 0;
  for (const auto& t : *tensors)
    total += t.bytes;
  EXPECT_EQ(total, 17U);  // 2x2 BF16 + 1 F32 + 5 I8

  // The index names a tensor its shard lacks.
  dir.write_text("model.safetensors.index.json",
                 json{{"weight_map",
                       {{"a", "model-00001-of-00002.safetensors"},
                        {"zz", "model-00002-of-00002.safetensors"}}}}
                     .dump());
  auto r = read_safetensors_folder(dir.path());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("zz"), std::string::npos);

  // A missing shard, and a shard outside the folder.
  dir.write_text("model.safetensors.index.json",
                 json{{"weight_map", {{"a", "model-00009.safetensors"}}}}.dump());
  r = read_safetensors_folder(dir.path());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::not_found);
  dir.write_text("model.safetensors.index.json",
                 json{{"weight_map", {{"a", "../model.safetensors"}}}}.dump());
  r = read_safetensors_folder(dir.path());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::input);
}

TEST(Safetensors, TensorInTwoShardsIsRejected) {
  TempDir dir;
  dir.write("x1.safetensors", make_file(json{{"a", tensor("U8", {1}, 0, 1)}}.dump(), 1));
  dir.write("x2.safetensors", make_file(json{{"a", tensor("U8", {1}, 0, 1)}}.dump(), 1));
  const auto r = read_safetensors_folder(dir.path());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("more than one"), std::string::npos);
}

TEST(Safetensors, EmptyFolderIsNotFound) {
  TempDir dir;
  const auto r = read_safetensors_folder(dir.path());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::not_found);
}

}  // namespace
}  // namespace kvprof::model
