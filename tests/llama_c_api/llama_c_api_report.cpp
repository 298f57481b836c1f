// Asks a prebuilt llama.cpp release for its own report of its buffers through its C API, with
// the llama_context_params layout of that release (read in its include/llama.h). The Node.js
// addons of npm's packages before 3.21.1 cannot set the KV cache's types; this can.
//
//   llama_c_api_report RELEASE_DIR BUILD MODEL.gguf SETTINGS_JSON
//
// BUILD: the release's llama.cpp build ("b3889"); only builds whose layout is below. SETTINGS_JSON:
// an array of {"n_ctx", "n_seq_max", "flash_attn"?, "n_batch", "n_ubatch"?, "type_k"?, "type_v"?}
// (n_ubatch = n_batch unless given, one thread, a KV cache per sequence and sliding-window caches
// not full, as the addon leaves them). Prints one JSON object per setting: {"settings",
// "model_log", "context_log", "n_ctx"} (what llama.cpp logged above debug level while loading the
// model and while making the context) or {"settings", "error"}. Exit 1 when the model does not
// load, 2 on bad arguments. Run it with LD_LIBRARY_PATH=RELEASE_DIR: libllama finds its libggml by
// name.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

using json = nlohmann::json;

// Where one release range keeps the fields the report sets (byte offsets in
// llama_context_params); the fields before type_k have the same places in all of them.
struct ContextLayout {
  uint32_t first_build;       // the builds whose headers were read (the tests' releases) and
  uint32_t last_build;        // those between; others are refused
  size_t flash_attn;          // bool flash_attn, or enum llama_flash_attn_type from b6325
  bool flash_attn_is_enum;    // -1 auto, 0 off, 1 on
  size_t offload_kqv;         // bool, true by default (checks the layout)
  ptrdiff_t swa_full = -1;    // bool, from b5429
  ptrdiff_t kv_unified = -1;  // bool, from b6071
};

// b3889 and b4753: ... type_k, type_v, logits_all, embeddings, offload_kqv, flash_attn, no_perf,
// abort_callback. b5640: abort_callback moved before the booleans, logits_all gone, op_offload
// and swa_full added. b6431 and b8121: flash_attn_type after attention_type, kv_unified added.
constexpr ContextLayout k_layouts[] = {
    {3889, 4753, 99, false, 98},
    {5640, 5640, 114, false, 113, 117},
    {6431, 8121, 36, true, 113, 116, 117},
};
constexpr size_t k_n_ctx = 0, k_n_batch = 4, k_n_ubatch = 8, k_n_seq_max = 12, k_n_threads = 16,
                 k_n_threads_batch = 20, k_type_k = 88, k_type_v = 92;
constexpr int32_t k_ggml_type_f16 = 1;

// The parameter structs, passed and returned by value: large enough for every layout above (on
// x86-64 a struct this size travels in memory, so the library reads and writes only its own
// bytes at the front).
struct Params {
  alignas(8) unsigned char bytes[256];
  template <class T>
  T get(size_t at) const {
    T v;
    std::memcpy(&v, bytes + at, sizeof v);
    return v;
  }
  template <class T>
  void set(size_t at, T v) {
    std::memcpy(bytes + at, &v, sizeof v);
  }
};

struct Api {
  void (*backend_init)();
  void (*log_set)(void (*)(int32_t, const char*, void*), void*);
  Params (*model_default_params)();
  Params (*context_default_params)();
  void* (*load_model_from_file)(const char*, Params);
  void (*free_model)(void*);
  void* (*new_context_with_model)(void*, Params);
  void (*free)(void*);
  uint32_t (*n_ctx)(const void*);
  void (*backend_load_all_from_path)(const char*);  // from libggml, where backends are modules
};

std::string g_log;
int32_t g_debug_level = 1;  // GGML_LOG_LEVEL_DEBUG: 4 before b4011 (#10124), 1 after
bool g_last_kept = true;

void on_log(int32_t level, const char* text, void*) {
  constexpr int32_t k_cont = 5;
  const bool keep = level == k_cont ? g_last_kept : level != g_debug_level;
  if (level != k_cont) g_last_kept = keep;
  if (keep && text) g_log += text;
}

template <class F>
bool resolve(void* lib, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  return out != nullptr;
}

// Why the model did not load: llama.cpp's lines that say so, or the last ones it logged.
std::string load_error(const std::string& log) {
  std::vector<std::string> lines, why;
  for (size_t at = 0; at < log.size();) {
    const size_t end = std::min(log.find('\n', at), log.size());
    if (end > at) lines.push_back(log.substr(at, end - at));
    at = end + 1;
  }
  for (const auto& line : lines) {
    if (line.find("error loading") != std::string::npos ||
        line.find("failed to load") != std::string::npos ||
        line.find("unknown model") != std::string::npos)
      why.push_back(line);
  }
  if (why.empty()) why.assign(lines.size() > 2 ? lines.end() - 2 : lines.begin(), lines.end());
  std::string out;
  for (size_t i = why.size() > 3 ? why.size() - 3 : 0; i < why.size(); ++i)
    out += (out.empty() ? "" : " | ") + why[i];
  return out;
}

int fail(const std::string& why, int code) {
  std::fprintf(stderr, "error: %s\n", why.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5)
    return fail("usage: llama_c_api_report RELEASE_DIR BUILD MODEL.gguf SETTINGS_JSON", 2);
  const std::filesystem::path dir = argv[1];
  const std::string build_text = argv[2];
  const uint32_t build =
      build_text.size() > 1 && build_text[0] == 'b' ? std::stoul(build_text.substr(1)) : 0;
  const ContextLayout* layout = nullptr;
  for (const auto& l : k_layouts) {
    if (build >= l.first_build && build <= l.last_build) layout = &l;
  }
  if (!layout) return fail("no llama_context_params layout read for " + build_text, 2);
  g_debug_level = build < 4011 ? 4 : 1;
  const json settings = json::parse(argv[4], nullptr, false);
  if (!settings.is_array()) return fail("SETTINGS_JSON is not a JSON array", 2);

  std::filesystem::path library = dir / "libllama.so";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("libllama.") && name.ends_with(".so")) library = entry.path();
  }
  void* lib = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fail(dlerror(), 2);
  Api api{};
  if (!resolve(lib, "llama_backend_init", api.backend_init) ||
      !resolve(lib, "llama_log_set", api.log_set) ||
      !resolve(lib, "llama_model_default_params", api.model_default_params) ||
      !resolve(lib, "llama_context_default_params", api.context_default_params) ||
      !resolve(lib, "llama_load_model_from_file", api.load_model_from_file) ||
      !resolve(lib, "llama_free_model", api.free_model) ||
      !resolve(lib, "llama_new_context_with_model", api.new_context_with_model) ||
      !resolve(lib, "llama_free", api.free) || !resolve(lib, "llama_n_ctx", api.n_ctx))
    return fail(library.string() + " lacks a function of llama.cpp's C API", 2);
  resolve(lib, "ggml_backend_load_all_from_path", api.backend_load_all_from_path);

  api.log_set(on_log, nullptr);
  if (api.backend_load_all_from_path) api.backend_load_all_from_path(dir.c_str());
  api.backend_init();

  // The defaults at the layout's places, before anything is set through it.
  const Params defaults = api.context_default_params();
  if (defaults.get<int32_t>(k_type_k) != k_ggml_type_f16 ||
      defaults.get<int32_t>(k_type_v) != k_ggml_type_f16 ||
      defaults.get<uint32_t>(k_n_seq_max) != 1 || !defaults.get<bool>(layout->offload_kqv) ||
      (layout->flash_attn_is_enum ? defaults.get<int32_t>(layout->flash_attn) != -1
                                  : defaults.get<bool>(layout->flash_attn)))
    return fail("llama_context_default_params of " + build_text + " does not have its layout", 2);

  void* model = api.load_model_from_file(argv[3], api.model_default_params());
  if (!model) return fail("the model did not load: " + load_error(g_log), 1);
  const std::string model_log = g_log;
  for (const json& s : settings) {
    g_log.clear();
    Params p = defaults;
    const auto n_batch = s.value("n_batch", 512U);
    p.set(k_n_ctx, s.value("n_ctx", 4096U));
    p.set(k_n_batch, n_batch);
    p.set(k_n_ubatch, s.value("n_ubatch", n_batch));
    p.set(k_n_seq_max, s.value("n_seq_max", 1U));
    p.set(k_n_threads, int32_t{1});
    p.set(k_n_threads_batch, int32_t{1});
    p.set(k_type_k, s.value("type_k", k_ggml_type_f16));
    p.set(k_type_v, s.value("type_v", k_ggml_type_f16));
    // No "flash_attn" (or null): the release's default (off, or auto from b6325).
    if (const auto fa = s.find("flash_attn"); fa != s.end() && fa->is_boolean()) {
      if (layout->flash_attn_is_enum)
        p.set(layout->flash_attn, int32_t{fa->get<bool>() ? 1 : 0});
      else
        p.set(layout->flash_attn, fa->get<bool>());
    }
    if (layout->swa_full >= 0) p.set(static_cast<size_t>(layout->swa_full), false);
    if (layout->kv_unified >= 0) p.set(static_cast<size_t>(layout->kv_unified), false);
    void* ctx = api.new_context_with_model(model, p);
    json out{{"settings", s}};
    if (!ctx) {
      out["error"] = g_log.empty() ? "failed" : load_error(g_log);
    } else {
      out["model_log"] = model_log;
      out["context_log"] = g_log;
      out["n_ctx"] = api.n_ctx(ctx);
      api.free(ctx);
    }
    std::printf("%s\n", out.dump().c_str());
    std::fflush(stdout);
  }
  api.free_model(model);
  return 0;
}
