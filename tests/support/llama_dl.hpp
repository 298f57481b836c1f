// Test-only binding to the real llama.cpp (libllama from scripts/fetch_llama.sh), loaded with
// dlopen: load a GGUF, read the model buffer sizes the loader logs, tokenize, decode, logits.
// Param structs are passed as opaque blobs of the sizes this libllama version uses (model 80,
// context 160 bytes), so no llama.h is needed. To be replaced by the product's engine binding.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

namespace kvprof::test {

class LlamaLib {
 public:
  struct ModelParams {
    alignas(8) unsigned char raw[80];
  };
  struct ContextParams {
    alignas(8) unsigned char raw[160];
  };
  struct Batch {
    int32_t n_tokens;
    int32_t* token;
    float* embd;
    int32_t* pos;
    int32_t* n_seq_id;
    int32_t** seq_id;
    int8_t* logits;
  };
  static_assert(sizeof(Batch) == 56);

  // The folder holding libllama: $KVPROF_LLAMA_LIB (a folder or the .so itself), else
  // <source>/.deps/llama/linux-x64.
  static std::filesystem::path lib_dir() {
    if (const char* env = std::getenv("KVPROF_LLAMA_LIB"); env != nullptr && *env != '\0') {
      const std::filesystem::path p(env);
      return p.extension() == ".so" ? p.parent_path() : p;
    }
    return std::filesystem::path(KVPROF_SOURCE_DIR) / ".deps/llama/linux-x64";
  }

  // The loaded library, or nullptr with `why` set (missing files or symbols).
  static LlamaLib* get(std::string& why) {
    static LlamaLib lib;
    static std::once_flag once;
    std::call_once(once, [] { lib.load(); });
    why = lib.m_error;
    return lib.m_error.empty() ? &lib : nullptr;
  }

  // Everything the engine logged since the last clear_log().
  std::string log() {
    std::lock_guard lock(m_log_mutex);
    return m_log;
  }
  void clear_log() {
    std::lock_guard lock(m_log_mutex);
    m_log.clear();
  }

  // Sum of the "<buffer> model buffer size = X MiB" lines in `log`, in MiB; -1 when none.
  static double model_buffer_mib(const std::string& log) {
    static const std::regex line(R"((\S+) model buffer size =\s*([0-9.]+) MiB)");
    double total = -1;
    for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it)
      total = (total < 0 ? 0 : total) + std::stod((*it)[2].str());
    return total;
  }

  // Function pointers (llama.h names).
  ModelParams (*model_default_params)() = nullptr;
  void* (*model_load_from_file)(const char*, ModelParams) = nullptr;
  void (*model_free)(void*) = nullptr;
  uint64_t (*model_size)(const void*) = nullptr;
  ContextParams (*context_default_params)() = nullptr;
  void* (*init_from_model)(void*, ContextParams) = nullptr;
  void (*free_context)(void*) = nullptr;
  const void* (*model_get_vocab)(const void*) = nullptr;
  int32_t (*vocab_n_tokens)(const void*) = nullptr;
  int32_t (*tokenize)(const void*, const char*, int32_t, int32_t*, int32_t, bool, bool) = nullptr;
  Batch (*batch_get_one)(int32_t*, int32_t) = nullptr;
  int32_t (*decode)(void*, Batch) = nullptr;
  float* (*get_logits_ith)(void*, int32_t) = nullptr;

  // A context of `n_ctx` tokens (batch and ubatch the same, one sequence); nullptr on failure.
  void* new_context(void* model, uint32_t n_ctx) {
    ContextParams p = context_default_params();
    for (size_t off : {size_t{0}, size_t{4}, size_t{8}})
      std::memcpy(p.raw + off, &n_ctx, 4);
    const uint32_t one = 1;
    std::memcpy(p.raw + 12, &one, 4);
    return init_from_model(model, p);
  }

 private:
  template <class F>
  bool sym(void* h, const char* name, F& out) {
    out = reinterpret_cast<F>(dlsym(h, name));
    if (out == nullptr) m_error = std::string("libllama lacks ") + name;
    return out != nullptr;
  }

  static void on_log(int /*level*/, const char* text, void* self) {
    auto* lib = static_cast<LlamaLib*>(self);
    std::lock_guard lock(lib->m_log_mutex);
    lib->m_log += text;
  }

  void load() {
    const auto dir = lib_dir();
    const auto llama = dir / "libllama.v0.5.0.so";
    const auto ggml = dir / "libggml.v0.5.0.so";
    if (!std::filesystem::exists(llama) || !std::filesystem::exists(ggml)) {
      m_error = "libllama not found in " + dir.string() +
                " (run scripts/fetch_llama.sh, or set KVPROF_LLAMA_LIB)";
      return;
    }
    void* g = dlopen(ggml.c_str(), RTLD_NOW | RTLD_GLOBAL);
    void* l = g != nullptr ? dlopen(llama.c_str(), RTLD_NOW | RTLD_GLOBAL) : nullptr;
    if (l == nullptr) {
      m_error = std::string("dlopen: ") + dlerror();
      return;
    }
    void (*load_all_from_path)(const char*) = nullptr;
    void (*backend_init)() = nullptr;
    void (*log_set)(void (*)(int, const char*, void*), void*) = nullptr;
    if (!sym(g, "ggml_backend_load_all_from_path", load_all_from_path) ||
        !sym(l, "llama_backend_init", backend_init) || !sym(l, "llama_log_set", log_set) ||
        !sym(l, "llama_model_default_params", model_default_params) ||
        !sym(l, "llama_model_load_from_file", model_load_from_file) ||
        !sym(l, "llama_model_free", model_free) || !sym(l, "llama_model_size", model_size) ||
        !sym(l, "llama_context_default_params", context_default_params) ||
        !sym(l, "llama_init_from_model", init_from_model) || !sym(l, "llama_free", free_context) ||
        !sym(l, "llama_model_get_vocab", model_get_vocab) ||
        !sym(l, "llama_vocab_n_tokens", vocab_n_tokens) || !sym(l, "llama_tokenize", tokenize) ||
        !sym(l, "llama_batch_get_one", batch_get_one) || !sym(l, "llama_decode", decode) ||
        !sym(l, "llama_get_logits_ith", get_logits_ith)) {
      return;
    }
    log_set(&LlamaLib::on_log, this);
    load_all_from_path(dir.c_str());
    backend_init();
  }

  std::string m_error;
  std::mutex m_log_mutex;
  std::string m_log;
};

// The library, or a skip (failure when KVPROF_REQUIRE_LLAMA=1) saying how to get it.
#define KVPROF_REQUIRE_LLAMA_LIB_OR_SKIP(lib_var)                                          \
  std::string llama_why_;                                                                  \
  kvprof::test::LlamaLib* lib_var = kvprof::test::LlamaLib::get(llama_why_);               \
  if (lib_var == nullptr) {                                                                \
    const char* req_ = std::getenv("KVPROF_REQUIRE_LLAMA");                                \
    if (req_ != nullptr && std::string(req_) == "1") FAIL() << llama_why_;                 \
    GTEST_SKIP() << llama_why_ << "; run scripts/fetch_llama.sh to test against libllama"; \
  }

}  // namespace kvprof::test
