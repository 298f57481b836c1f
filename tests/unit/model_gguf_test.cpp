// Tests of src/kvprof/model/gguf.cpp and gguf_types.cpp: the ggml type table against published
// block sizes, parsing of files written by the test-only writer, every broken-file error, the
// incremental file reader and the corpus of broken files.
#include "kvprof/model/gguf.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/gguf_writer.hpp"

namespace kvprof::model {
namespace {

namespace fs = std::filesystem;
using test::Bytes;
using test::GgufWriter;
namespace gt = test::gguf_type;
namespace gg = test::ggml;

Expected<GgufFile> parse_gguf_bytes(const std::vector<uint8_t>& b) {
  return parse_gguf(b, b.size());
}

// Asserts that `b` fails to parse with an input error whose message contains `needle`.
void expect_error(const std::vector<uint8_t>& b, const std::string& needle) {
  const auto r = parse_gguf_bytes(b);
  ASSERT_FALSE(r.has_value()) << "expected an error containing: " << needle;
  EXPECT_EQ(r.error().kind, ErrorKind::input);
  EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
}

fs::path temp_dir() {
  const auto dir =
      fs::temp_directory_path() /
      ("kvprof_gguf_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::create_directories(dir);
  return dir;
}

// A small valid file: two keys, two tensors, the last one ending the file.
GgufWriter tiny_writer() {
  GgufWriter w;
  w.str("general.architecture", "llama").u32("llama.block_count", 1);
  w.tensor("a.weight", gg::F32, {8, 2});
  w.tensor("b.weight", gg::Q8_0, {32, 3});
  return w;
}

// --- ggml type table -------------------------------------------------------------------------

TEST(GgmlTypes, BlockSizesMatchGgmlLayouts) {
  // (type id, elements per block, bytes per block) from ggml-common.h's block structs.
  const struct {
    uint32_t id;
    const char* name;
    uint32_t elements;
    uint32_t bytes;
  } cases[] = {
      {0, "F32", 1, 4},         {1, "F16", 1, 2},         {30, "BF16", 1, 2},
      {28, "F64", 1, 8},        {24, "I8", 1, 1},         {25, "I16", 1, 2},
      {26, "I32", 1, 4},        {27, "I64", 1, 8},        {2, "Q4_0", 32, 18},
      {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
      {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
      {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
      {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
      {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
      {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
      {23, "IQ4_XS", 256, 136}, {29, "IQ1_M", 256, 56},   {34, "TQ1_0", 256, 54},
      {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},    {40, "NVFP4", 64, 36},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(ggml_type_name(c.id), c.name);
    const auto block = ggml_block(c.id);
    ASSERT_TRUE(block.has_value());
    EXPECT_EQ(block->block_elements, c.elements);
    EXPECT_EQ(block->block_bytes, c.bytes);
    EXPECT_EQ(ggml_tensor_bytes(c.id, 4096ULL * c.elements), 4096ULL * c.bytes);
  }
}

TEST(GgmlTypes, BitsPerWeightMatchPublishedFigures) {
  // Bits per weight as llama.cpp's quantize tool and PRs describe the formats.
  const struct {
    uint32_t id;
    double bpw;
  } cases[] = {{12, 4.5},    {14, 6.5625}, {13, 5.5},    {10, 2.625},  {11, 3.4375}, {8, 8.5},
               {16, 2.0625}, {17, 2.3125}, {18, 3.0625}, {21, 3.4375}, {22, 2.5625}, {19, 1.5625},
               {29, 1.75},   {23, 4.25},   {34, 1.6875}, {35, 2.0625}, {39, 4.25}};
  for (const auto& c : cases) {
    const auto bytes = ggml_tensor_bytes(c.id, 256 * 1024);
    ASSERT_TRUE(bytes.has_value()) << c.id;
    EXPECT_DOUBLE_EQ(static_cast<double>(*bytes) * 8 / (256 * 1024), c.bpw) << c.id;
  }
}

TEST(GgmlTypes, UnknownRemovedAndPartialBlocksAreRejected) {
  for (uint32_t id : {4U, 5U, 31U, 32U, 33U, 36U, 37U, 38U, 43U, 1000U}) {
    EXPECT_FALSE(ggml_type_name(id).has_value()) << id;
    EXPECT_FALSE(ggml_tensor_bytes(id, 256).has_value()) << id;
  }
  EXPECT_FALSE(ggml_tensor_bytes(12, 255).has_value());         // not a whole Q4_K block
  EXPECT_FALSE(ggml_tensor_bytes(28, 1ULL << 62).has_value());  // bytes overflow 64 bits
  EXPECT_EQ(ggml_tensor_bytes(1, 7), 14U);
}

TEST(GgmlTypes, FileTypeNames) {
  EXPECT_EQ(llama_file_type_name(15), "Q4_K_M");
  EXPECT_EQ(llama_file_type_name(7), "Q8_0");
  EXPECT_EQ(llama_file_type_name(1), "F16");
  EXPECT_EQ(llama_file_type_name(38), "MXFP4_MOE");
  EXPECT_EQ(llama_file_type_name(32), "BF16");
  EXPECT_FALSE(llama_file_type_name(4).has_value());
  EXPECT_TRUE(ggml_type_is_float(30));
  EXPECT_FALSE(ggml_type_is_float(12));
}

// --- parsing ---------------------------------------------------------------------------------

TEST(GgufParse, TinyFileLayout) {
  const auto b = tiny_writer().build();
  const auto f = parse_gguf_bytes(b);
  ASSERT_TRUE(f.has_value()) << f.error().message;
  EXPECT_EQ(f->version, 3U);
  ASSERT_EQ(f->tensors.size(), 2U);
  EXPECT_EQ(f->tensors[0].name, "a.weight");
  EXPECT_EQ(f->tensors[0].type_name, "F32");
  EXPECT_EQ(f->tensors[0].shape, (std::vector<uint64_t>{8, 2}));
  EXPECT_EQ(f->tensors[0].bytes, 64U);
  EXPECT_EQ(f->tensors[1].type_name, "Q8_0");
  EXPECT_EQ(f->tensors[1].bytes, 3U * 34U);
  EXPECT_EQ(f->tensor_offsets[1], 64U);
  EXPECT_EQ(f->data_offset % 32, 0U);
  EXPECT_EQ(f->data_offset + 64 + 102, b.size());
}

TEST(GgufParse, EveryMetadataValueType) {
  GgufWriter w(2);
  w.u8("t.u8", 200).i8("t.i8", -5).u16("t.u16", 60000).i16("t.i16", -30000);
  w.u32("t.u32", 4000000000U).i32("t.i32", -7).u64("t.u64", 1ULL << 40).i64("t.i64", -(1LL << 40));
  w.f32("t.f32", 0.5F).f64("t.f64", -2.25).boolean("t.yes", true).boolean("t.no", false);
  w.str("t.str", "héllo");
  w.arr_i32("t.ints", {-1, 2, -3});
  w.arr_bool("t.bools", {true, false});
  std::vector<uint32_t> many(5000);
  for (uint32_t i = 0; i < many.size(); ++i)
    many[i] = i;
  w.arr_u32("t.many", many);
  std::vector<std::string> tokens(300);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = "tok" + std::to_string(i);
  w.arr_str("t.tokens", tokens);
  Bytes nested;  // [[1, 2], [3]] as an array of u32 arrays
  nested.u32(gt::array).u64(2);
  nested.u32(gt::u32).u64(2).u32(1).u32(2);
  nested.u32(gt::u32).u64(1).u32(3);
  w.kv("t.nested", gt::array, nested);
  const auto f = parse_gguf_bytes(w.build());
  ASSERT_TRUE(f.has_value()) << f.error().message;
  EXPECT_EQ(f->version, 2U);
  const auto& md = f->metadata;
  EXPECT_EQ(md.at("t.u8").as_uint(), 200U);
  EXPECT_EQ(md.at("t.u8").type, GgufType::u8);
  EXPECT_EQ(std::get<int64_t>(md.at("t.i8").value), -5);
  EXPECT_EQ(md.at("t.u16").as_uint(), 60000U);
  EXPECT_EQ(std::get<int64_t>(md.at("t.i16").value), -30000);
  EXPECT_EQ(md.at("t.u32").as_uint(), 4000000000U);
  EXPECT_FALSE(md.at("t.i32").as_uint().has_value());
  EXPECT_EQ(md.at("t.u64").as_uint(), 1ULL << 40);
  EXPECT_EQ(std::get<int64_t>(md.at("t.i64").value), -(1LL << 40));
  EXPECT_DOUBLE_EQ(std::get<double>(md.at("t.f32").value), 0.5);
  EXPECT_EQ(md.at("t.f32").type, GgufType::f32);
  EXPECT_DOUBLE_EQ(std::get<double>(md.at("t.f64").value), -2.25);
  EXPECT_TRUE(std::get<bool>(md.at("t.yes").value));
  EXPECT_FALSE(std::get<bool>(md.at("t.no").value));
  ASSERT_NE(md.at("t.str").as_string(), nullptr);
  EXPECT_EQ(*md.at("t.str").as_string(), "héllo");
  EXPECT_EQ(md.at("t.ints").array_type, GgufType::i32);
  ASSERT_EQ(md.at("t.ints").elements().size(), 3U);
  EXPECT_EQ(std::get<int64_t>(md.at("t.ints").elements()[2].value), -3);
  EXPECT_TRUE(std::get<bool>(md.at("t.bools").elements()[0].value));
  EXPECT_EQ(f->array_length("t.many"), 5000U);
  EXPECT_EQ(md.at("t.many").elements().size(), k_gguf_kept_numbers);
  EXPECT_EQ(md.at("t.many").elements()[4095].as_uint(), 4095U);
  EXPECT_EQ(f->array_length("t.tokens"), 300U);
  EXPECT_EQ(md.at("t.tokens").elements().size(), k_gguf_kept_strings);
  EXPECT_EQ(*md.at("t.tokens").elements()[63].as_string(), "tok63");
  const auto outer = md.at("t.nested").elements();
  ASSERT_EQ(outer.size(), 2U);
  EXPECT_EQ(outer[0].array_length, 2U);
  EXPECT_EQ(outer[0].elements()[1].as_uint(), 2U);
  EXPECT_EQ(outer[1].elements()[0].as_uint(), 3U);
  EXPECT_FALSE(f->array_length("t.u8").has_value());
  EXPECT_FALSE(f->array_length("absent").has_value());
  EXPECT_TRUE(f->tensors.empty());
}

TEST(GgufParse, AlignmentIsHonoured) {
  GgufWriter w(3, 64);
  w.u32("general.alignment", 64);
  w.tensor("a", gg::F32, {3});
  w.tensor("b", gg::F32, {5});
  const auto f = parse_gguf_bytes(w.build());
  ASSERT_TRUE(f.has_value()) << f.error().message;
  EXPECT_EQ(f->alignment, 64U);
  EXPECT_EQ(f->data_offset % 64, 0U);
  EXPECT_EQ(f->tensor_offsets[1], 64U);

  GgufWriter bad(3, 48);
  bad.u32("general.alignment", 48);
  expect_error(bad.build(), "power of two");
  GgufWriter zero;
  zero.u32("general.alignment", 0);
  expect_error(zero.build(), "power of two");
  GgufWriter text;
  text.str("general.alignment", "32");
  expect_error(text.build(), "power of two");
}

TEST(GgufParse, EveryPrefixFailsCleanly) {
  const auto b = tiny_writer().build();
  ASSERT_TRUE(parse_gguf_bytes(b).has_value());
  for (size_t n = 0; n < b.size(); ++n) {
    const std::vector<uint8_t> prefix(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    const auto r = parse_gguf_bytes(prefix);
    ASSERT_FALSE(r.has_value()) << "prefix of " << n << " bytes parsed";
    EXPECT_EQ(r.error().kind, ErrorKind::input);
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
  }
}

TEST(GgufParse, PrefixOfLargerFileIsEnoughForTheHeader) {
  const auto b = tiny_writer().build();
  const auto f = parse_gguf_bytes(b);
  ASSERT_TRUE(f.has_value());
  // Only the header bytes, but the true file size: tensor data is not needed.
  const std::vector<uint8_t> header(b.begin(),
                                    b.begin() + static_cast<std::ptrdiff_t>(f->data_offset));
  const auto g = parse_gguf(header, b.size());
  ASSERT_TRUE(g.has_value()) << g.error().message;
  EXPECT_EQ(g->tensors.size(), 2U);
}

TEST(GgufParse, BadMagicAndVersions) {
  expect_error(tiny_writer().magic("GGML").build(), "not a GGUF file");
  expect_error(GgufWriter(1).build(), "version 1");
  expect_error(GgufWriter(4).build(), "unsupported version 4");
  expect_error(GgufWriter(0x03000000).build(), "big-endian");
}

TEST(GgufParse, HugeCountsAreRejectedBeforeAllocating) {
  expect_error(tiny_writer().tensor_count(1ULL << 62).build(), "tensor count");
  expect_error(tiny_writer().tensor_count(2'000'000).build(), "tensor count");
  expect_error(tiny_writer().kv_count(UINT64_MAX).build(), "key/value count");
  expect_error(tiny_writer().kv_count(50).build(), "key/value count");
  GgufWriter w;
  Bytes arr;
  arr.u32(gt::u64).u64(1ULL << 60);
  w.kv("huge.array", gt::array, arr);
  expect_error(w.build(), "does not fit");
}

TEST(GgufParse, StringLengthPastEndOfFile) {
  GgufWriter w;
  Bytes s;
  s.u64(1000).raw({'a', 'b'});
  w.kv("general.name", gt::string, s);
  expect_error(w.build(), "remain in the file");
  Bytes key;  // a key whose own length is past the end
  key.u64(UINT64_MAX).raw(std::vector<uint8_t>(20, 0));
  std::vector<uint8_t> b = GgufWriter().kv_count(1).build();
  b.insert(b.end(), key.data.begin(), key.data.end());
  expect_error(b, "key 0");
}

TEST(GgufParse, UnknownTypes) {
  GgufWriter v;
  v.kv("x", 13, Bytes{}.u32(0));
  expect_error(v.build(), "unknown value type 13");
  GgufWriter a;
  a.kv("x", gt::array, Bytes{}.u32(99).u64(0));
  expect_error(a.build(), "unknown value type 99");
  for (uint32_t removed : {4U, 31U, 36U, 41U}) {
    GgufWriter t;
    t.raw_tensor({"t", removed, {32}, 32, std::nullopt});
    expect_error(t.build(), "unknown ggml type");
  }
}

TEST(GgufParse, DuplicateKeysAndTensors) {
  GgufWriter k;
  k.u32("a.b", 1).u32("a.b", 2);
  expect_error(k.build(), "duplicate key 'a.b'");
  GgufWriter t;
  t.raw_tensor({"w", gg::F32, {8}, 32, 0});
  t.raw_tensor({"w", gg::F32, {8}, 32, 32});
  expect_error(t.build(), "duplicate tensor 'w'");
}

TEST(GgufParse, OffsetsAlignedInsideTheFileAndDisjoint) {
  GgufWriter mis;
  mis.raw_tensor({"w", gg::F32, {8}, 32, 4});
  expect_error(mis.build(), "not a multiple of the alignment");
  GgufWriter overlap;
  overlap.raw_tensor({"a", gg::F32, {16}, 64, 0});
  overlap.raw_tensor({"b", gg::F32, {16}, 64, 32});
  expect_error(overlap.build(), "overlap");
  auto past = tiny_writer().build();
  past.pop_back();
  expect_error(past, "extends past the end");
  GgufWriter far;
  far.raw_tensor({"w", gg::F32, {8}, 32, 1ULL << 62});
  expect_error(far.build(), "past the end of the file");
}

TEST(GgufParse, DimensionChecks) {
  GgufWriter five;
  five.raw_tensor({"w", gg::F32, {1, 1, 1, 1, 1}, 4, std::nullopt});
  expect_error(five.build(), "5 dimensions");
  GgufWriter zero_dims;
  zero_dims.raw_tensor({"w", gg::F32, {}, 4, std::nullopt});
  expect_error(zero_dims.build(), "0 dimensions");
  GgufWriter zero;
  zero.raw_tensor({"w", gg::F32, {4, 0}, 4, std::nullopt});
  expect_error(zero.build(), "dimension 1 is 0");
  GgufWriter overflow;
  overflow.raw_tensor({"w", gg::F32, {1ULL << 32, 1ULL << 32}, 4, std::nullopt});
  expect_error(overflow.build(), "overflows");
  GgufWriter negative;
  negative.raw_tensor({"w", gg::F32, {UINT64_MAX}, 4, std::nullopt});
  expect_error(negative.build(), "dimension 0");
  GgufWriter rows;
  rows.raw_tensor({"w", gg::Q4_K, {128, 4}, 144, std::nullopt});
  expect_error(rows.build(), "not whole Q4_K blocks");
}

TEST(GgufParse, NestingDepthAndEmptyKeyAreBounded) {
  Bytes deep;
  for (int i = 0; i < 20; ++i)
    deep.u32(gt::array).u64(1);
  deep.u32(gt::u8).u64(0);
  GgufWriter w;
  w.kv("deep", gt::array, deep);
  expect_error(w.build(), "nested deeper");
  GgufWriter e;
  e.u32("", 1);
  expect_error(e.build(), "empty");
}

// --- read_gguf -------------------------------------------------------------------------------

TEST(GgufRead, ReadsHeaderLargerThanTheFirstChunk) {
  const auto dir = temp_dir();
  GgufWriter w;
  std::vector<std::string> tokens(3000, std::string(1000, 'x'));  // ~3 MB of header
  w.str("general.architecture", "llama").arr_str("tokenizer.ggml.tokens", tokens);
  w.tensor("w", gg::F16, {64, 64});
  w.write(dir / "big.gguf");
  const auto f = read_gguf(dir / "big.gguf");
  ASSERT_TRUE(f.has_value()) << f.error().message;
  EXPECT_EQ(f->array_length("tokenizer.ggml.tokens"), 3000U);
  EXPECT_EQ(f->tensors.at(0).bytes, 64U * 64U * 2U);
  EXPECT_EQ(f->data_offset + 64 * 64 * 2, fs::file_size(dir / "big.gguf"));
  fs::remove_all(dir);
}

TEST(GgufRead, ErrorKinds) {
  const auto dir = temp_dir();
  auto missing = read_gguf(dir / "nope.gguf");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().kind, ErrorKind::not_found);
  auto directory = read_gguf(dir);
  ASSERT_FALSE(directory.has_value());
  EXPECT_EQ(directory.error().kind, ErrorKind::input);
  auto bytes = tiny_writer().build();
  bytes.resize(bytes.size() - 10);
  std::ofstream(dir / "cut.gguf", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  auto cut = read_gguf(dir / "cut.gguf");
  ASSERT_FALSE(cut.has_value());
  EXPECT_EQ(cut.error().kind, ErrorKind::input);
  EXPECT_NE(cut.error().message.find("cut.gguf"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvprof::model
