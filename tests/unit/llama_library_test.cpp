// The real libllama (llama.cpp 0.5, the npm package the setup fetches) through kvprof's dlopen
// binding: finding it, its version and backends, the exact memory llama.cpp reports for a tiny
// model against what kvprof reads from the GGUF, and decoding.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kvprof/llama/engine.hpp"
#include "kvprof/llama/library.hpp"
#include "kvprof/llama/memory.hpp"
#include "kvprof/model/gguf.hpp"
#include "support/tiny_llama.hpp"

namespace kvprof::llama {
namespace {
namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("kvprof_llama_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

std::shared_ptr<LlamaLib> load_lib(const fs::path& dir) {
  LlamaLibOptions o;
  o.path = dir.string();
  auto lib = LlamaLib::load(o);
  EXPECT_TRUE(lib.has_value()) << (lib ? "" : lib.error().message);
  return lib ? *lib : nullptr;
}

TEST(EngineLlamaLib, MissingLibrarySaysWhereItLookedAndHowToInstall) {
  const fs::path empty = temp_dir("empty");
  LlamaLibOptions o;
  o.path = empty.string();
  auto lib = LlamaLib::load(o);
  ASSERT_FALSE(lib.has_value());
  EXPECT_EQ(lib.error().kind, ErrorKind::driver);
  EXPECT_NE(lib.error().message.find(empty.string()), std::string::npos) << lib.error().message;
  EXPECT_NE(lib.error().message.find("fetch_llama.sh"), std::string::npos);
}

TEST(EngineLlamaLib, FileThatIsNotALibraryIsADriverError) {
  const fs::path dir = temp_dir("bogus");
  std::ofstream(dir / "libllama.so") << "not an ELF file";
  LlamaLibOptions o;
  o.path = (dir / "libllama.so").string();
  auto lib = LlamaLib::load(o);
  ASSERT_FALSE(lib.has_value());
  EXPECT_EQ(lib.error().kind, ErrorKind::driver);
  EXPECT_NE(lib.error().message.find("cannot load"), std::string::npos) << lib.error().message;
}

TEST(EngineLlamaLib, TheCudaPackagesNameAndAFileTheVariableNamesAreFound) {
  // @node-llama-cpp/linux-x64-cuda names it libllama.cuda.v0.5.0.so (the CPU package
  // libllama.v0.5.0.so); KVPROF_LLAMA_LIB naming a file means that file, whatever its name.
  const fs::path dir = temp_dir("cuda_package");
  std::ofstream(dir / "libllama.cuda.v0.5.0.so") << "x";
  std::ofstream(dir / "libllama-common.so") << "x";
  LlamaLibOptions o;
  o.path = dir.string();
  auto found = find_llama_library(o);
  ASSERT_TRUE(found.has_value()) << found.error().message;
  EXPECT_EQ(found->filename(), "libllama.cuda.v0.5.0.so");
  std::ofstream(dir / "my-llama-build.so") << "x";
  ::setenv("KVPROF_LLAMA_LIB", (dir / "my-llama-build.so").c_str(), 1);
  auto named = find_llama_library(LlamaLibOptions{});
  ::unsetenv("KVPROF_LLAMA_LIB");
  ASSERT_TRUE(named.has_value()) << named.error().message;
  EXPECT_EQ(named->filename(), "my-llama-build.so");
}

TEST(EngineLlamaLib, KvCacheTypesAndFlashAttnUseLlamaCppNames) {
  EXPECT_EQ(kv_cache_type_id("f16").value(), 1);
  EXPECT_EQ(kv_cache_type_id("Q8_0").value(), 8);
  EXPECT_EQ(kv_cache_type_id("q4_0").value(), 2);
  EXPECT_EQ(kv_cache_type_id("bf16").value(), 30);
  ASSERT_FALSE(kv_cache_type_id("fp8").has_value());
  EXPECT_EQ(kv_cache_type_id("fp8").error().kind, ErrorKind::usage);
  EXPECT_EQ(parse_flash_attn("on").value(), FlashAttn::on);
  EXPECT_EQ(parse_flash_attn("off").value(), FlashAttn::off);
  EXPECT_EQ(parse_flash_attn("auto").value(), FlashAttn::auto_);
  EXPECT_FALSE(parse_flash_attn("maybe").has_value());
}

TEST(EngineLlamaLib, LoadsThePackagedLibraryAndNamesItsVersionAndBackend) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(dir);
  auto lib = load_lib(*dir);
  ASSERT_TRUE(lib);
  const auto& info = lib->info();
  EXPECT_TRUE(info.llama_version.starts_with("0.5")) << info.llama_version;
  EXPECT_EQ(info.package, "@node-llama-cpp/linux-x64@3.22.1");
  EXPECT_TRUE(info.cpu_backend.starts_with("libggml-cpu-")) << info.cpu_backend;
  ASSERT_FALSE(info.devices.empty());
  EXPECT_EQ(info.devices.front().type, "cpu");
  EXPECT_NE(info.system_info.find("CPU"), std::string::npos);
  // A second load in the same process is the same library, not a second registration.
  EXPECT_EQ(load_lib(*dir).get(), lib.get());
}

// Bytes of every tensor of a GGUF as kvprof's own reader computes them.
uint64_t gguf_tensor_bytes(const fs::path& file) {
  auto g = model::read_gguf(file);
  EXPECT_TRUE(g.has_value());
  uint64_t total = 0;
  if (g) {
    for (const auto& t : g->tensors)
      total += t.bytes;
  }
  return total;
}

TEST(EngineLlamaLib, TinyModelBuffersMatchTheGgufToTheByte) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(dir);
  auto lib = load_lib(*dir);
  ASSERT_TRUE(lib);
  const fs::path gguf = temp_dir("tiny") / "tiny.gguf";
  const test::TinyLlama shape;
  test::write_tiny_llama(gguf, shape);
  LlamaSettings s;
  s.model_path = gguf.string();
  s.n_ctx = 1024;
  s.n_seq_max = 2;
  auto model = LlamaModel::load(lib, s);
  ASSERT_TRUE(model.has_value()) << model.error().message;
  EXPECT_EQ((*model)->facts().n_layer, static_cast<int32_t>(shape.n_layer));
  EXPECT_EQ((*model)->facts().n_vocab, static_cast<int32_t>(shape.n_vocab));
  EXPECT_EQ((*model)->facts().size_bytes, gguf_tensor_bytes(gguf));

  for (const char* cache : {"f16", "q8_0"}) {
    s.cache_type_k = s.cache_type_v = cache;
    auto ctx = LlamaContext::create(**model, s);
    ASSERT_TRUE(ctx.has_value()) << ctx.error().message;
    EXPECT_EQ((*ctx)->n_ctx(), 1024U);
    EXPECT_EQ((*ctx)->n_seq_max(), 2U);
    uint64_t model_bytes = 0, kv_bytes = 0, compute_bytes = 0;
    for (const auto& b : memory_breakdown(*lib, **ctx)) {
      model_bytes += b.model_bytes;
      kv_bytes += b.context_bytes;
      compute_bytes += b.compute_bytes;
    }
    EXPECT_EQ(model_bytes, gguf_tensor_bytes(gguf)) << cache;
    const uint64_t kv_width = shape.n_head_kv * shape.head_dim();  // per layer, K or V
    const uint64_t row_bytes = std::string(cache) == "f16" ? kv_width * 2 : kv_width / 32 * 34;
    EXPECT_EQ(kv_bytes, 1024ULL * shape.n_layer * 2 * row_bytes) << cache;
    EXPECT_GT(compute_bytes, 0U);
  }
}

TEST(EngineLlamaLib, DecodesSequencesTogetherAndRefusesWhatDoesNotFit) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(dir);
  auto lib = load_lib(*dir);
  ASSERT_TRUE(lib);
  const fs::path gguf = temp_dir("decode") / "tiny.gguf";
  test::write_tiny_llama(gguf);
  LlamaSettings s;
  s.model_path = gguf.string();
  s.n_ctx = 256;
  s.n_seq_max = 4;
  s.n_batch = 64;  // the prefill is split into several logical batches
  auto model = LlamaModel::load(lib, s);
  ASSERT_TRUE(model.has_value()) << model.error().message;
  auto ctx = LlamaContext::create(**model, s);
  ASSERT_TRUE(ctx.has_value()) << ctx.error().message;
  std::vector<std::vector<int32_t>> prompts(3, std::vector<int32_t>(50, 300));
  auto first = (*ctx)->prefill(prompts);
  ASSERT_TRUE(first.has_value()) << first.error().message;
  ASSERT_EQ(first->next_tokens.size(), 3U);
  EXPECT_LE(first->done_mono_ns[0], first->done_mono_ns[2]);  // sequence after sequence
  auto next = (*ctx)->step({0, 1, 2}, first->next_tokens, {50, 50, 50});
  ASSERT_TRUE(next.has_value()) << next.error().message;
  EXPECT_EQ(next->size(), 3U);
  const auto perf = (*ctx)->perf();
  // llama.cpp counts every multi-token batch as prompt: 150 prompt tokens + the 3 of the step.
  EXPECT_EQ(perf.prompt_tokens, 153);

  // 5 x 60 tokens do not fit in 256 cells: llama_decode finds no room and says so.
  (*ctx)->clear();
  std::vector<std::vector<int32_t>> too_many(5, std::vector<int32_t>(60, 300));
  auto refused = (*ctx)->prefill(too_many);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message.find("KV cache"), std::string::npos) << refused.error().message;
}

TEST(EngineLlamaLib, GarbageFileIsRefusedWithLlamaCppsReason) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(dir);
  auto lib = load_lib(*dir);
  ASSERT_TRUE(lib);
  const fs::path bad = temp_dir("bad") / "bad.gguf";
  std::ofstream(bad) << "GGUF but not really a model file at all";
  LlamaSettings s;
  s.model_path = bad.string();
  auto model = LlamaModel::load(lib, s);
  ASSERT_FALSE(model.has_value());
  EXPECT_EQ(model.error().kind, ErrorKind::input);
  EXPECT_NE(model.error().message.find("llama.cpp said"), std::string::npos)
      << model.error().message;
}

}  // namespace
}  // namespace kvprof::llama
