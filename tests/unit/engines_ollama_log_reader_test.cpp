// Ollama's server log read: the two public startups of tests/fixtures/ollama_logs (Ollama's own
// lines, then its llama.cpp runner's buffers), and a plain llama.cpp log left llama.cpp's.
#include <gtest/gtest.h>

#include <string>

#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/registry.hpp"
#include "support/printed_sizes.hpp"

namespace kvprof::enginelog {
namespace {

using kvprof::test::mib_x100;

EngineLogReport parse_ollama_fixture(const std::string& path) {
  auto r = parse_engine_log_file(std::string(KVPROF_FIXTURES_DIR) + "/" + path,
                                 engines::log_parse_options());
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message);
  return r ? *r : EngineLogReport{};
}

uint64_t ollama_figure_bytes(const EngineLogReport& r, Component c, std::string_view device) {
  for (const auto& f : r.figures) {
    if (f.component == c && f.device == device) return f.size.bytes;
  }
  return 0;
}

TEST(EngineLogOllama, TheT4StartupIsOllamasWithItsRunnersBuffers) {
  const auto r = parse_ollama_fixture("ollama_logs/v0.3.9_t4_llama31_8b_q4_0.log");
  EXPECT_EQ(r.engine, engines::Engine::ollama);
  EXPECT_EQ(ollama_figure_bytes(r, Component::weights, "CUDA0"), mib_x100(415600));
  EXPECT_EQ(ollama_figure_bytes(r, Component::weights, "CPU"), mib_x100(28181));
  EXPECT_EQ(ollama_figure_bytes(r, Component::kv_cache, "CUDA0"), mib_x100(102400));
  EXPECT_EQ(ollama_figure_bytes(r, Component::compute, "CUDA0"), mib_x100(56000));
  EXPECT_EQ(ollama_figure_bytes(r, Component::compute, "CUDA_Host"), mib_x100(2401));
  ASSERT_TRUE(r.settings.n_ctx);
  EXPECT_EQ(r.settings.n_ctx->value, 8192U);
}

TEST(EngineLogOllama, TheRtx4090StartupKeepsTheLoraOutOfTheModel) {
  const auto r = parse_ollama_fixture("ollama_logs/v0.5.4_rtx4090_llama31_8b_q4_k_m.log");
  EXPECT_EQ(r.engine, engines::Engine::ollama);
  EXPECT_EQ(ollama_figure_bytes(r, Component::weights, "CUDA0"), mib_x100(440349));
  EXPECT_EQ(ollama_figure_bytes(r, Component::kv_cache, "CUDA0"), mib_x100(102400));
  EXPECT_EQ(ollama_figure_bytes(r, Component::compute, "CUDA0"), mib_x100(56000));
  ASSERT_TRUE(r.settings.n_seq_max);
  EXPECT_EQ(r.settings.n_seq_max->value, 4U);
}

TEST(EngineLogOllama, ItsVersionAndAPlainLlamaCppLogStaysLlamaCpps) {
  // The listening line as Ollama prints it (the v0.5.4 startup's "version 0.5.4-0-g2ddc32d-dirty").
  const auto r = parse_engine_log(
      "time=2025-12-01T20:28:45.700Z level=INFO source=routes.go:1259 msg=\"Listening on "
      "[::]:11434 (version 0.5.4-0-g2ddc32d-dirty)\"\n"
      "llm_load_tensors:        CUDA0 model buffer size =  4403.49 MiB\n",
      engines::log_parse_options());
  EXPECT_EQ(r.engine, engines::Engine::ollama);
  ASSERT_TRUE(r.version);
  EXPECT_EQ(r.version->value, "0.5.4");
  EXPECT_EQ(ollama_figure_bytes(r, Component::weights, "CUDA0"), mib_x100(440349));
  const auto plain = parse_ollama_fixture("llama_cpp_logs/startup_f16_np4.log");
  EXPECT_EQ(plain.engine, engines::Engine::llamacpp);
  EXPECT_FALSE(plain.figures.empty());
}

}  // namespace
}  // namespace kvprof::enginelog
