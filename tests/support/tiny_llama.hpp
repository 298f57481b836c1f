// Test-only: where the real libllama is (tests that need it fail when KVPROF_REQUIRE_LLAMA=1, as
// the test script sets, and are skipped otherwise), and a tiny llama-architecture GGUF written
// with the test GGUF writer (zero weights: memory and speed as a real model of that shape, the
// text meaningless) with a byte-level vocabulary.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/llama/library.hpp"
#include "support/gguf_writer.hpp"

namespace kvprof::test {

// The folder of the libllama the tests use: KVPROF_LLAMA_LIB, else <repo>/.deps/llama/linux-x64.
inline std::optional<std::filesystem::path> llama_test_dir() {
  if (const char* env = std::getenv("KVPROF_LLAMA_LIB"); env != nullptr && *env != '\0') {
    return std::filesystem::path(env);
  }
  const std::filesystem::path dir =
      std::filesystem::path(KVPROF_SOURCE_DIR) / ".deps/llama/linux-x64";
  llama::LlamaLibOptions o;
  o.path = dir.string();
  if (llama::find_llama_library(o)) return dir;
  return std::nullopt;
}

inline bool llama_required() {
  const char* env = std::getenv("KVPROF_REQUIRE_LLAMA");
  return env != nullptr && std::string(env) == "1";
}

// Skips the test (or fails it under KVPROF_REQUIRE_LLAMA=1) when libllama is not installed.
#define KVPROF_REQUIRE_LLAMA_OR_SKIP(dir_var)                              \
  const auto dir_var = ::kvprof::test::llama_test_dir();                   \
  if (!dir_var) {                                                          \
    if (::kvprof::test::llama_required())                                  \
      FAIL() << "libllama missing: run scripts/fetch_llama.sh";            \
    GTEST_SKIP() << "libllama not installed (run scripts/fetch_llama.sh)"; \
  }

struct TinyLlama {
  uint32_t n_layer = 2;
  uint32_t n_embd = 128;  // head_dim 32: quantized KV caches need blocks of 32
  uint32_t n_head = 4;
  uint32_t n_head_kv = 2;
  uint32_t n_ff = 128;
  uint32_t n_vocab = 512;
  uint32_t weight_type = ggml::F16;  // of the matrices; norms are F32

  [[nodiscard]] uint32_t head_dim() const { return n_embd / n_head; }
  // K + V bytes per token per layer of an f16 cache.
  [[nodiscard]] uint64_t kv_f16_bytes_per_token_layer() const {
    return 2ULL * n_head_kv * head_dim() * 2;
  }
};

// Writes a tiny llama GGUF to `path`.
inline void write_tiny_llama(const std::filesystem::path& path, const TinyLlama& m = {}) {
  GgufWriter w;
  w.str("general.architecture", "llama").str("general.name", "kvprof-tiny-llama");
  w.u32("llama.context_length", 8192).u32("llama.embedding_length", m.n_embd);
  w.u32("llama.block_count", m.n_layer).u32("llama.feed_forward_length", m.n_ff);
  w.u32("llama.attention.head_count", m.n_head).u32("llama.attention.head_count_kv", m.n_head_kv);
  w.u32("llama.rope.dimension_count", m.head_dim());
  w.f32("llama.attention.layer_norm_rms_epsilon", 1e-5F).f32("llama.rope.freq_base", 10000.0F);
  w.u32("general.file_type", m.weight_type == ggml::F16 ? 1 : 7);
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    tokens.emplace_back(name);
    types.push_back(6);
  }
  for (uint32_t i = static_cast<uint32_t>(tokens.size()); i < m.n_vocab; ++i) {
    tokens.push_back("\xE2\x96\x81w" + std::to_string(i));
    types.push_back(1);
  }
  Bytes scores;
  scores.u32(gguf_type::f32).u64(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i)
    scores.put(0.0F);
  w.str("tokenizer.ggml.model", "llama").str("tokenizer.ggml.pre", "default");
  w.arr_str("tokenizer.ggml.tokens", tokens).kv("tokenizer.ggml.scores", gguf_type::array, scores);
  w.arr_i32("tokenizer.ggml.token_type", types);
  w.u32("tokenizer.ggml.bos_token_id", 1).u32("tokenizer.ggml.eos_token_id", 2);
  w.u32("tokenizer.ggml.unknown_token_id", 0);
  const uint32_t kv = m.n_head_kv * m.head_dim();
  const uint32_t t = m.weight_type;
  w.tensor("token_embd.weight", t, {m.n_embd, m.n_vocab});
  w.tensor("output_norm.weight", ggml::F32, {m.n_embd});
  w.tensor("output.weight", t, {m.n_embd, m.n_vocab});
  for (uint32_t l = 0; l < m.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    w.tensor(p + "attn_norm.weight", ggml::F32, {m.n_embd});
    w.tensor(p + "attn_q.weight", t, {m.n_embd, m.n_embd});
    w.tensor(p + "attn_k.weight", t, {m.n_embd, kv});
    w.tensor(p + "attn_v.weight", t, {m.n_embd, kv});
    w.tensor(p + "attn_output.weight", t, {m.n_embd, m.n_embd});
    w.tensor(p + "ffn_norm.weight", ggml::F32, {m.n_embd});
    w.tensor(p + "ffn_gate.weight", t, {m.n_embd, m.n_ff});
    w.tensor(p + "ffn_up.weight", t, {m.n_embd, m.n_ff});
    w.tensor(p + "ffn_down.weight", t, {m.n_ff, m.n_embd});
  }
  const auto bytes = w.build();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

}  // namespace kvprof::test
