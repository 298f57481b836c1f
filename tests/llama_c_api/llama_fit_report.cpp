// Runs llama.cpp's own --fit (common_fit_params, exported by the libllama-common of npm's
// prebuilt releases from v0.4.0) on a model file with libllama's default context parameters and
// no -c: the dry runs, the context it lowers and the lines it logs, on this machine's devices
// (the CPU build: the host, its physical memory the budget).
//
//   llama_fit_report RELEASE_DIR MODEL.gguf TARGET_BYTES N_CTX_MIN
//
// Prints what llama.cpp logs (its fit's lines at every level, the dry runs' below error as debug)
// and last "kvprof-fit-report: status S n_ctx N" (S: 0 fitted, 1 failed, 2 error; N: the context
// it chose, 0 when it left the model's). Exit 2 on bad arguments, 3 when the release lacks what
// is called. Run it with LD_LIBRARY_PATH=RELEASE_DIR: libllama finds its libggml by name.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace {

// Room for a release's llama_model_params or llama_context_params returned by value (both are
// returned through memory the caller gives; a release writes its own size, far below this).
struct ParamsBuffer {
  alignas(16) unsigned char bytes[4096];
};

struct TensorOverride {
  const char* pattern;
  void* buffer_type;
};

constexpr int k_ggml_log_level_error = 4;
constexpr int k_common_log_level_debug = 5;

// The library in `dir` whose name starts with `prefix` and ends with ".so" ("libllama." finds
// libllama.v0.5.0.so); empty when none.
std::string library(const std::filesystem::path& dir, const std::string& prefix) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with(prefix) && name.ends_with(".so")) return e.path().string();
  }
  return {};
}

// libllama's lines at warning and error only: the dry runs' loading lines are not the fit's.
void warnings_only(int level, const char* text, void* /*user_data*/) {
  if (level == 3 || level == 4) std::fputs(text, stderr);
}

template <class F>
F symbol(void* lib, const char* name) {
  void* p = lib == nullptr ? nullptr : dlsym(lib, name);
  if (p == nullptr) {
    std::fprintf(stderr, "llama_fit_report: this release has no %s\n", name);
    std::exit(3);
  }
  return reinterpret_cast<F>(p);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: llama_fit_report RELEASE_DIR MODEL.gguf TARGET_BYTES N_CTX_MIN\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const std::string model = argv[2];
  const uint64_t target_bytes = std::strtoull(argv[3], nullptr, 10);
  const auto n_ctx_min = static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 10));
  void* libs[4] = {};
  const char* prefixes[4] = {"libggml-base.", "libggml.", "libllama.", "libllama-common."};
  for (int i = 0; i < 4; ++i) {
    const std::string path = library(dir, prefixes[i]);
    libs[i] = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (libs[i] == nullptr) {
      std::fprintf(stderr, "llama_fit_report: cannot load %s*.so from %s: %s\n", prefixes[i],
                   dir.c_str(), path.empty() ? "none there" : dlerror());
      return 3;
    }
  }
  void* ggml = libs[1];
  void* llama = libs[2];
  void* common = libs[3];
  symbol<void (*)(const char*)>(ggml, "ggml_backend_load_all_from_path")(dir.c_str());
  symbol<void (*)()>(llama, "llama_backend_init")();
  using LogCallback = void (*)(int, const char*, void*);
  symbol<void (*)(LogCallback, void*)>(llama, "llama_log_set")(warnings_only, nullptr);
  // Every line of the fit, whatever its level in this release.
  symbol<void (*)(int)>(common, "_Z30common_log_set_verbosity_tholdi")(k_common_log_level_debug);
  using Fit = int (*)(const char*, void*, void*, float*, TensorOverride*, size_t*, uint32_t,
                      const void*, int);
  const auto fit = symbol<Fit>(
      common,
      "_Z17common_fit_paramsPKcP18llama_model_paramsP20llama_context_paramsPfP32llama_model_"
      "tensor_buft_overridePmjPK22common_fit_extra_model14ggml_log_level");
  ParamsBuffer model_params = symbol<ParamsBuffer (*)()>(llama, "llama_model_default_params")();
  ParamsBuffer context_params = symbol<ParamsBuffer (*)()>(llama, "llama_context_default_params")();
  // llama_context_params starts with n_ctx in every release; 0: the model's, which --fit lowers.
  auto* n_ctx = reinterpret_cast<uint32_t*>(context_params.bytes);
  *n_ctx = 0;
  const size_t n_devices = symbol<size_t (*)()>(llama, "llama_max_devices")();
  const size_t n_overrides = symbol<size_t (*)()>(llama, "llama_max_tensor_buft_overrides")();
  std::vector<float> tensor_split(n_devices, 0.0F);
  std::vector<TensorOverride> overrides(n_overrides, TensorOverride{nullptr, nullptr});
  std::vector<size_t> margins(n_devices, static_cast<size_t>(target_bytes));
  const int status =
      fit(model.c_str(), model_params.bytes, context_params.bytes, tensor_split.data(),
          overrides.data(), margins.data(), n_ctx_min, nullptr, k_ggml_log_level_error);
  symbol<void (*)(void*)>(common, "_Z16common_log_flushP10common_log")(
      symbol<void* (*)()>(common, "_Z15common_log_mainv")());
  std::fflush(stderr);
  std::printf("kvprof-fit-report: status %d n_ctx %u\n", status, *n_ctx);
  return 0;
}
