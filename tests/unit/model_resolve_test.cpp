// load_model: config.json paths, model folders with safetensors headers (and the dtype/quant
// cross-checks), .gguf paths, catalog names, and paths that do not exist.
#include "kvprof/model/resolve.hpp"
#include "support/hf_fixture.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace kvprof::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path k_hf_fixtures = fs::path(KVPROF_FIXTURES_DIR) / "hf";

class ResolveTempDir {
 public:
  ResolveTempDir() {
    m_path = fs::temp_directory_path() /
             ("kvprof_resolve_" +
              std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(m_path);
    fs::create_directories(m_path);
  }
  ~ResolveTempDir() { fs::remove_all(m_path); }
  [[nodiscard]] const fs::path& path() const { return m_path; }

 private:
  fs::path m_path;
};

// Writes a safetensors file holding `tensors` ({name, dtype, shape}) with zero data.
void write_safetensors(
    const fs::path& file,
    const std::vector<std::tuple<std::string, std::string, std::vector<uint64_t>>>& tensors) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, dtype, shape] : tensors) {
    uint64_t n = 1;
    for (const auto d : shape)
      n *= d;
    const uint64_t size = dtype == "BF16" || dtype == "F16"  ? 2
                          : dtype == "F32" || dtype == "I32" ? 4
                                                             : 1;
    header[name] = {
        {"dtype", dtype}, {"shape", shape}, {"data_offsets", {offset, offset + n * size}}};
    offset += n * size;
  }
  const std::string text = header.dump();
  std::ofstream out(file, std::ios::binary);
  const uint64_t len = text.size();
  for (int i = 0; i < 8; ++i)
    out.put(static_cast<char>(len >> (8 * i)));
  out << text;
  out << std::string(offset, '\0');
}

TEST(Resolve, ConfigJsonPath) {
  const auto path = (k_hf_fixtures / "qwen2.5-7b.json").string();
  const auto m = load_model(path);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->origin, ModelSpec::Origin::hf_config);
  EXPECT_EQ(m->model_type, "qwen2");
  EXPECT_EQ(m->source, path);
  EXPECT_TRUE(m->tensors.empty());
}

TEST(Resolve, FolderWithSafetensorsReadsTensorsAndCrossChecks) {
  ResolveTempDir dir;
  fs::copy_file(k_hf_fixtures / "llama-3.1-8b.json", dir.path() / "config.json");
  // Two layers' worth of names while the config says 32; F16 while the config says bf16.
  write_safetensors(dir.path() / "model.safetensors",
                    {{"model.embed_tokens.weight", "F16", {16, 8}},
                     {"model.layers.0.self_attn.q_proj.weight", "F16", {8, 8}},
                     {"model.layers.1.self_attn.q_proj.weight", "F16", {8, 8}},
                     {"model.layers.1.self_attn.q_proj.weight_scale", "F8_E4M3", {8}}});
  const auto m = load_model(dir.path().string());
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->origin, ModelSpec::Origin::safetensors);
  ASSERT_EQ(m->tensors.size(), 4U);
  EXPECT_EQ(m->tensors.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(m->tensors.front().bytes, 256U);
  EXPECT_TRUE(test::has_warning(*m, "torch_dtype bf16"));
  EXPECT_TRUE(test::has_warning(*m, "fp8 tensors"));
  EXPECT_TRUE(test::has_warning(*m, "2 decoder layers"));
}

TEST(Resolve, QuantizedFolderWithoutQuantTensorsWarns) {
  ResolveTempDir dir;
  fs::copy_file(k_hf_fixtures / "qwen2.5-7b-awq.json", dir.path() / "config.json");
  write_safetensors(dir.path() / "model.safetensors",
                    {{"model.layers.0.mlp.up_proj.weight", "F16", {4, 4}}});
  const auto m = load_model(dir.path().string());
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_TRUE(test::has_warning(*m, "no qweight"));
}

TEST(Resolve, FolderWithBrokenShardFails) {
  ResolveTempDir dir;
  fs::copy_file(k_hf_fixtures / "llama-3.1-8b.json", dir.path() / "config.json");
  std::ofstream(dir.path() / "model.safetensors") << "garbage!";
  const auto m = load_model(dir.path().string());
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().kind, ErrorKind::input);
  EXPECT_NE(m.error().message.find("model.safetensors"), std::string::npos) << m.error().message;
}

TEST(Resolve, EmptyFolderIsNotFound) {
  ResolveTempDir dir;
  const auto m = load_model(dir.path().string());
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().kind, ErrorKind::not_found);
}

TEST(Resolve, GgufPathGoesToTheGgufReader) {
  ResolveTempDir dir;
  const auto file = dir.path() / "model.gguf";
  std::ofstream(file) << "not a gguf file at all";
  auto m = load_model(file.string());
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().kind, ErrorKind::input) << m.error().message;
  // A folder holding one .gguf file reads it too.
  m = load_model(dir.path().string());
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().kind, ErrorKind::input) << m.error().message;
}

TEST(Resolve, SafetensorsFileAloneIsRefused) {
  ResolveTempDir dir;
  write_safetensors(dir.path() / "model.safetensors", {{"w", "F16", {2}}});
  const auto m = load_model((dir.path() / "model.safetensors").string());
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().kind, ErrorKind::input);
  EXPECT_NE(m.error().message.find("config.json"), std::string::npos);
}

TEST(Resolve, MissingPathsAreNotFound) {
  for (const auto* ref : {"./no/such/config.json", "missing-model.gguf", "/definitely/not/here"}) {
    const auto m = load_model(ref);
    ASSERT_FALSE(m) << ref;
    EXPECT_EQ(m.error().kind, ErrorKind::not_found) << ref;
    EXPECT_NE(m.error().message.find("no such file"), std::string::npos) << ref;
  }
}

TEST(Resolve, CatalogNames) {
  const auto m = load_model("meta-llama/Llama-3.1-8B-Instruct");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->origin, ModelSpec::Origin::catalog);
  EXPECT_EQ(m->n_layer, 32U);
  const auto missing = load_model("no-such-model-anywhere-xyz");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::not_found);
  const auto empty = load_model("  ");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().kind, ErrorKind::usage);
}

}  // namespace
}  // namespace kvprof::model
