// Black-box tests of `kvprof make-gguf`: a file written and readable, the JSON summary, exit 2 for
// an unsupported architecture or type, exit 1 and no file at all for an unwritable path.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "kvprof/model/gguf.hpp"

#include "support/run_kvprof.hpp"

namespace {

namespace fs = std::filesystem;

using kvprof::test::Run;
using kvprof::test::run_kvprof;

class CliMakeGguf : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("kvprof-cli-make-gguf-" + std::to_string(::getpid()));
    fs::create_directories(m_dir);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(m_dir, ec);
  }
  fs::path m_dir;
};

TEST_F(CliMakeGguf, WritesAFileAndAJsonSummary) {
  const fs::path config = m_dir / "config.json";
  std::FILE* f = std::fopen(config.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs(
      R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","hidden_size":256,
          "intermediate_size":512,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":64,
          "num_hidden_layers":3,"vocab_size":2000,"max_position_embeddings":4096,
          "tie_word_embeddings":true})",
      f);
  std::fclose(f);
  const fs::path out = m_dir / "tiny.gguf";
  const auto r = run_kvprof("make-gguf -m " + config.string() + " -o " + out.string() +
                            " --type q8_0 --seed 3 --json");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("arch"), "qwen3");
  EXPECT_EQ(j.at("path"), out.string());
  // token_embd + output_norm + 3 layers x (attn_norm, q, k, v, o, q_norm, k_norm, ffn_norm,
  // gate, down, up)
  EXPECT_EQ(j.at("tensors"), 2 + 3 * 11);
  EXPECT_EQ(j.at("file_bytes").get<uint64_t>(), fs::file_size(out));
  const auto gguf = kvprof::model::read_gguf(out);
  ASSERT_TRUE(gguf.has_value()) << gguf.error().message;
  uint64_t bytes = 0;
  for (const auto& t : gguf->tensors)
    bytes += t.bytes;
  EXPECT_EQ(j.at("tensor_bytes").get<uint64_t>(), bytes);
  // Matrices Q8_0: 34 bytes per 32 weights; embedding 256 x 2000.
  EXPECT_EQ(gguf->tensors.front().bytes, 256U * 2000 / 32 * 34);

  const auto text = run_kvprof("make-gguf -m " + config.string() + " -o " + out.string());
  EXPECT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("wrote " + out.string()), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find('\r'), std::string::npos);  // no progress line when not a TTY
}

TEST_F(CliMakeGguf, UnsupportedArchitectureExits2) {
  const auto r = run_kvprof("make-gguf -m deepseek-v3 -o " + (m_dir / "x.gguf").string());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("deepseek_v3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("supported: llama"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(m_dir / "x.gguf"));
  const auto t =
      run_kvprof("make-gguf -m qwen2.5-0.5b --type q5_k -o " + (m_dir / "x.gguf").string());
  EXPECT_EQ(t.rc, 2) << t.out;
}

TEST_F(CliMakeGguf, UnwritablePathIsOneLineExit1AndNoFile) {
  const fs::path out = m_dir / "no-such-dir" / "x.gguf";
  const auto r = run_kvprof("make-gguf -m qwen2.5-0.5b -o " + out.string());
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_EQ(r.out.rfind("kvprof: error: cannot write", 0), 0U) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::recursive_directory_iterator(m_dir))
    ++entries;
  EXPECT_EQ(entries, 0U);
}

// -o naming a device or a pipe (-o /dev/null, as root) is refused: the file is renamed into
// place, which would replace it with a regular file.
TEST_F(CliMakeGguf, AnOutputThatIsNotARegularFileIsRefusedAndLeftAsItWas) {
  const fs::path fifo = m_dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto r = run_kvprof("make-gguf -m qwen2.5-0.5b -o " + fifo.string());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("is not a regular file"), std::string::npos) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_TRUE(fs::is_fifo(fifo));
}

}  // namespace
