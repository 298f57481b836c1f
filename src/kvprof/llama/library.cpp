// LlamaLib: finding, loading and checking libllama; its log callback.
#include "kvprof/llama/library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>

#include "kvprof/sys/proc.hpp"

namespace kvprof::llama {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view k_install_hint =
    "run `bash scripts/fetch_llama.sh` (npm pack @node-llama-cpp/linux-x64 into .deps/llama/), "
    "or point --llama-lib / KVPROF_LLAMA_LIB at a libllama.so";

// The libllama file in `dir`: libllama.so, libllama.so.N, libllama.vX.Y.Z.so, libllama.bNNNN.so
// or libllama.cuda.vX.Y.Z.so (the names node-llama-cpp's packages gave it over its releases and
// builds).
std::optional<fs::path> library_in(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "libllama.so" || name.starts_with("libllama.so.") ||
        ((name.starts_with("libllama.v") || name.starts_with("libllama.b") ||
          name.starts_with("libllama.cuda.v")) &&
         name.ends_with(".so"))) {
      found.push_back(entry.path());
    }
  }
  if (found.empty()) return std::nullopt;
  std::sort(found.begin(), found.end());
  return found.front();
}

// The folder of the running executable, when /proc says.
std::optional<fs::path> exe_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  return exe.parent_path();
}

// Reads a small JSON file; nullopt when missing or malformed.
std::optional<nlohmann::json> small_json(const fs::path& file) {
  auto text = sys::read_text_file(file.string(), 1 << 16);
  if (!text) return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// Package and llama.cpp release of an npm-packaged libllama folder.
void read_package_facts(const fs::path& dir, LlamaLibInfo& info) {
  if (auto pkg = small_json(dir / "package.json"); pkg && pkg->is_object()) {
    const auto name = pkg->value("name", std::string{});
    const auto version = pkg->value("version", std::string{});
    if (!name.empty()) info.package = version.empty() ? name : name + "@" + version;
  }
  if (auto meta = small_json(dir / "_nlcBuildMetadata.json"); meta && meta->is_object()) {
    const auto* p = &*meta;
    for (const char* key : {"buildOptions", "llamaCpp"}) {
      if (!p->is_object() || !p->contains(key)) return;
      p = &(*p)[key];
    }
    if (p->is_object()) {
      const auto repo = p->value("repo", std::string{});
      const auto release = p->value("release", std::string{});
      info.llama_cpp_release = repo.empty() ? release : repo + " " + release;
    }
  }
}

// Resolves every entry point; the name of the first one missing, if any.
std::optional<std::string> resolve(void* handle, abi::Functions& f) {
  std::optional<std::string> missing;
  auto get = [&](auto& slot, const char* name, bool required = true) {
    void* sym = dlsym(handle, name);
    if (sym == nullptr && required && !missing) missing = name;
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(sym);
  };
  get(f.backend_init, "llama_backend_init");
  get(f.log_set, "llama_log_set");
  get(f.print_system_info, "llama_print_system_info");
  get(f.version, "llama_version", false);
  get(f.model_default_params, "llama_model_default_params");
  get(f.context_default_params, "llama_context_default_params");
  get(f.model_load_from_file, "llama_model_load_from_file");
  get(f.model_free, "llama_model_free");
  get(f.init_from_model, "llama_init_from_model");
  get(f.free, "llama_free");
  get(f.model_get_vocab, "llama_model_get_vocab");
  get(f.vocab_n_tokens, "llama_vocab_n_tokens");
  get(f.model_n_layer, "llama_model_n_layer");
  get(f.model_n_embd, "llama_model_n_embd");
  get(f.model_n_ctx_train, "llama_model_n_ctx_train");
  get(f.model_size, "llama_model_size");
  get(f.model_n_params, "llama_model_n_params");
  get(f.model_desc, "llama_model_desc");
  get(f.n_ctx, "llama_n_ctx");
  get(f.n_batch, "llama_n_batch");
  get(f.n_ubatch, "llama_n_ubatch");
  get(f.n_seq_max, "llama_n_seq_max");
  get(f.batch_init, "llama_batch_init");
  get(f.batch_free, "llama_batch_free");
  get(f.decode, "llama_decode");
  get(f.get_logits_ith, "llama_get_logits_ith");
  get(f.get_memory, "llama_get_memory");
  get(f.memory_clear, "llama_memory_clear");
  get(f.memory_seq_rm, "llama_memory_seq_rm");
  get(f.perf_context, "llama_perf_context");
  get(f.perf_context_reset, "llama_perf_context_reset");
  get(f.tokenize, "llama_tokenize");
  get(f.token_to_piece, "llama_token_to_piece");
  get(f.vocab_is_eog, "llama_vocab_is_eog");
  get(f.model_chat_template, "llama_model_chat_template", false);
  get(f.chat_apply_template, "llama_chat_apply_template", false);
  get(f.chat_builtin_templates, "llama_chat_builtin_templates", false);
  // ggml's symbols come through libllama's dependencies.
  get(f.backend_load_all_from_path, "ggml_backend_load_all_from_path");
  get(f.backend_dev_count, "ggml_backend_dev_count");
  get(f.backend_dev_get, "ggml_backend_dev_get");
  get(f.backend_dev_name, "ggml_backend_dev_name");
  get(f.backend_dev_description, "ggml_backend_dev_description");
  get(f.backend_dev_memory, "ggml_backend_dev_memory");
  get(f.backend_dev_type, "ggml_backend_dev_type");
  get(f.backend_dev_buffer_type, "ggml_backend_dev_buffer_type");
  return missing;
}

// Checks the library's default parameters against the values the declared layout expects at
// each offset; the first mismatch, described, if any.
std::optional<std::string> check_layout(const abi::Functions& f) {
  const abi::ModelParams m = f.model_default_params();
  const abi::ContextParams c = f.context_default_params();
  struct Check {
    const char* field;
    long long got;
    long long want;
  };
  const std::array checks = {
      Check{"model.n_gpu_layers", m.n_gpu_layers, -1},
      Check{"model.split_mode", m.split_mode, 1},
      Check{"model.load_mode", m.load_mode, -1},
      Check{"model.main_gpu", m.main_gpu, 0},
      Check{"model.use_extra_bufts", m.use_extra_bufts, 1},
      Check{"model.vocab_only", m.vocab_only, 0},
      Check{"context.n_ctx", c.n_ctx, 512},
      Check{"context.n_batch", c.n_batch, 2048},
      Check{"context.n_ubatch", c.n_ubatch, 512},
      Check{"context.n_seq_max", c.n_seq_max, 1},
      Check{"context.flash_attn_type", c.flash_attn_type, -1},
      Check{"context.type_k", c.type_k, 1},
      Check{"context.type_v", c.type_v, 1},
      Check{"context.offload_kqv", c.offload_kqv, 1},
      Check{"context.embeddings", c.embeddings, 0},
  };
  for (const auto& ch : checks) {
    if (ch.got != ch.want) {
      return fmt::format("default {} is {} where kvprof's layout expects {}", ch.field, ch.got,
                         ch.want);
    }
  }
  if (c.n_threads <= 0 || c.n_threads > 4096 || c.n_threads_batch != c.n_threads) {
    return fmt::format("default context.n_threads is {}", c.n_threads);
  }
  return std::nullopt;
}

}  // namespace

std::vector<fs::path> llama_search_dirs(const LlamaLibOptions& options) {
  std::vector<fs::path> dirs;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    dirs.push_back(fs::is_regular_file(p, ec) ? p.parent_path() : p);
  };
  if (!options.path.empty()) {
    add(options.path);
    return dirs;
  }
  if (const char* env = std::getenv("KVPROF_LLAMA_LIB"); env != nullptr && *env != '\0') add(env);
  for (const auto& d : options.extra_dirs)
    add(d);
  if (auto dir = exe_dir()) {
    fs::path p = *dir;
    for (int up = 0; up < 5 && !p.empty(); ++up) {
      for (const char* pkg : {"linux-x64-cuda", "linux-x64"})
        dirs.push_back(p / ".deps" / "llama" / pkg);
      if (p == p.parent_path()) break;
      p = p.parent_path();
    }
  }
  for (const char* sys_dir : {"/usr/local/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib"})
    dirs.emplace_back(sys_dir);
  return dirs;
}

std::optional<bool> drivable_release(std::string_view release) {
  // "ggml-org/llama.cpp v0.5.0" -> "v0.5.0".
  if (const size_t space = release.rfind(' '); space != std::string_view::npos)
    release.remove_prefix(space + 1);
  if (release.size() > 1 && release[0] == 'b' &&
      std::all_of(release.begin() + 1, release.end(), [](char c) { return std::isdigit(c); })) {
    return false;  // llama.cpp's build-numbered releases came before its versioned ones
  }
  unsigned major = 0, minor = 0;
  if (release.size() < 4 || release[0] != 'v' ||
      std::sscanf(std::string(release.substr(1)).c_str(), "%u.%u", &major, &minor) != 2) {
    return std::nullopt;
  }
  return major > k_oldest_release_major ||
         (major == k_oldest_release_major && minor >= k_oldest_release_minor);
}

Expected<void> check_library_release(const fs::path& library) {
  LlamaLibInfo info;
  read_package_facts(library.parent_path(), info);
  if (info.llama_cpp_release.empty() || drivable_release(info.llama_cpp_release).value_or(true))
    return {};
  // "ggml-org/llama.cpp b5640": the release, then where it is from.
  std::string release = info.llama_cpp_release, from = info.package;
  if (const size_t space = release.rfind(' '); space != std::string::npos) {
    from = release.substr(0, space) + (from.empty() ? "" : ", " + from);
    release.erase(0, space + 1);
  }
  return fail(ErrorKind::driver,
              fmt::format("{} is llama.cpp {}{}, older than kvprof drives: its loader speaks the C "
                          "API of llama.cpp v{}.{}.0 and later (@node-llama-cpp/linux-x64 3.21.1 "
                          "on; the install step fetches 3.22.1)",
                          library.string(), release, from.empty() ? "" : " (" + from + ")",
                          k_oldest_release_major, k_oldest_release_minor));
}

Expected<fs::path> find_llama_library(const LlamaLibOptions& options) {
  std::error_code ec;
  const auto checked = [](const fs::path& file) -> Expected<fs::path> {
    if (auto r = check_library_release(file); !r) return std::unexpected(r.error());
    return file;
  };
  if (!options.path.empty() && fs::is_regular_file(options.path, ec))
    return checked(fs::path(options.path));
  // A file KVPROF_LLAMA_LIB names is that file, whatever its name, as --llama-lib's is.
  if (const char* env = std::getenv("KVPROF_LLAMA_LIB");
      options.path.empty() && env != nullptr && fs::is_regular_file(env, ec)) {
    return checked(fs::path(env));
  }
  const auto dirs = llama_search_dirs(options);
  for (const auto& dir : dirs) {
    if (auto file = library_in(dir)) return checked(*file);
  }
  std::string looked;
  for (const auto& d : dirs)
    looked += (looked.empty() ? "" : ", ") + d.string();
  // A missing engine is a missing dependency (exit 1), not a wrong argument.
  return fail(ErrorKind::driver,
              fmt::format("no libllama found (looked in {}); {}", looked, k_install_hint));
}

Expected<std::shared_ptr<LlamaLib>> LlamaLib::load(const LlamaLibOptions& options) {
  auto file = find_llama_library(options);
  if (!file) return std::unexpected(file.error());
  // ggml's backend registry is process-wide: a library is loaded and initialised once.
  static std::mutex loaded_mutex;
  static std::map<fs::path, std::shared_ptr<LlamaLib>> loaded;  // never unloaded
  std::lock_guard loaded_lock(loaded_mutex);
  if (auto it = loaded.find(*file); it != loaded.end()) return it->second;
  std::shared_ptr<LlamaLib> lib(new LlamaLib());
  lib->m_info.library = *file;
  void* handle = dlopen(file->c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return fail(ErrorKind::driver, fmt::format("cannot load {}: {}", file->string(),
                                               why != nullptr ? why : "unknown error"));
  }
  lib->m_handles.push_back(handle);
  if (auto missing = resolve(handle, lib->m_fn)) {
    return fail(ErrorKind::driver,
                fmt::format("{} has no {}: not a llama.cpp build kvprof can drive", file->string(),
                            *missing));
  }
  auto& f = lib->m_fn;
  read_package_facts(file->parent_path(), lib->m_info);
  lib->m_info.llama_version = f.version != nullptr ? f.version() : "unknown (before 0.5)";
  if (auto bad = check_layout(f)) {
    const std::string release = lib->m_info.llama_cpp_release.empty()
                                    ? lib->m_info.llama_version
                                    : lib->m_info.llama_cpp_release;
    return fail(
        ErrorKind::driver,
        fmt::format("{} (llama.cpp {}) has a parameter layout this kvprof does not know "
                    "({}); it drives llama.cpp v{}.{}.0 and later as packaged in "
                    "@node-llama-cpp/linux-x64 3.21.1 on",
                    file->string(), release, *bad, k_oldest_release_major, k_oldest_release_minor));
  }
  f.log_set(&LlamaLib::log_callback, lib.get());
  f.backend_load_all_from_path(file->parent_path().c_str());
  f.backend_init();
  lib->m_info.system_info = f.print_system_info();
  lib->m_info.devices = lib->devices();
  for (const auto& line : lib->recent_log(k_kept_log_lines)) {
    constexpr std::string_view k_cpu = "loaded CPU backend from ";
    if (auto pos = line.find(k_cpu); pos != std::string::npos) {
      lib->m_info.cpu_backend = fs::path(line.substr(pos + k_cpu.size())).filename().string();
    }
  }
  loaded[*file] = lib;
  return lib;
}

LlamaLib::~LlamaLib() {
  if (m_fn.log_set != nullptr) m_fn.log_set(nullptr, nullptr);
  // The libraries stay mapped: ggml's backends register process-wide state and atexit
  // handlers that must not outlive their code.
}

abi::ModelParams LlamaLib::default_model_params() const {
  return m_fn.model_default_params();
}

abi::ContextParams LlamaLib::default_context_params() const {
  return m_fn.context_default_params();
}

void LlamaLib::set_log_sink(std::function<void(const LlamaLogLine&)> sink) {
  std::lock_guard lock(m_log_mutex);
  m_sink = std::move(sink);
}

std::vector<std::string> LlamaLib::recent_log(size_t n) const {
  std::lock_guard lock(m_log_mutex);
  std::vector<std::string> out;
  const size_t take = std::min(n, m_kept.size());
  for (auto it = m_kept.end() - static_cast<std::ptrdiff_t>(take); it != m_kept.end(); ++it)
    out.push_back(it->text);
  return out;
}

std::vector<std::string> LlamaLib::kept_log(bool debug) const {
  std::lock_guard lock(m_log_mutex);
  std::vector<std::string> out;
  for (const auto& line : m_kept) {
    if (debug || line.level != abi::log_debug) out.push_back(line.text);
  }
  return out;
}

std::vector<LlamaDevice> LlamaLib::devices() const {
  std::vector<LlamaDevice> out;
  const size_t n = m_fn.backend_dev_count();
  for (size_t i = 0; i < n && i < 64; ++i) {
    abi::BackendDevice* dev = m_fn.backend_dev_get(i);
    if (dev == nullptr) continue;
    LlamaDevice d;
    const char* name = m_fn.backend_dev_name(dev);
    const char* desc = m_fn.backend_dev_description(dev);
    d.name = name != nullptr ? name : "";
    d.description = desc != nullptr ? desc : "";
    const int32_t type = m_fn.backend_dev_type(dev);
    d.type = type == 0 ? "cpu" : type == 1 ? "gpu" : "other";
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    m_fn.backend_dev_memory(dev, &free_bytes, &total_bytes);
    if (total_bytes > 0) {
      d.free_bytes = free_bytes;
      d.total_bytes = total_bytes;
    }
    out.push_back(std::move(d));
  }
  return out;
}

void LlamaLib::log_callback(int32_t level, const char* text, void* user_data) {
  if (user_data == nullptr || text == nullptr) return;
  static_cast<LlamaLib*>(user_data)->on_log(level, text);
}

void LlamaLib::on_log(int32_t level, const char* text) {
  constexpr size_t k_max_line_bytes = 64 * 1024;
  std::vector<LlamaLogLine> done;
  std::function<void(const LlamaLogLine&)> sink;
  {
    std::lock_guard lock(m_log_mutex);
    if (level != abi::log_cont && m_partial.empty()) m_partial_level = level;
    for (const char* p = text; *p != '\0'; ++p) {
      if (*p == '\n') {
        done.push_back({m_partial_level, std::move(m_partial)});
        m_partial.clear();
        continue;
      }
      if (m_partial.size() < k_max_line_bytes) m_partial.push_back(*p);
    }
    for (const auto& line : done) {
      m_kept.push_back(line);
      m_kept_bytes += line.text.size() + 1;
    }
    // Over the budget: the oldest debug line goes first, then the oldest line.
    while (m_kept_bytes > k_kept_log_bytes && !m_kept.empty()) {
      auto victim = std::find_if(m_kept.begin(), m_kept.end(),
                                 [](const LlamaLogLine& l) { return l.level == abi::log_debug; });
      if (victim == m_kept.end()) victim = m_kept.begin();
      m_kept_bytes -= victim->text.size() + 1;
      m_kept.erase(victim);
    }
    sink = m_sink;
  }
  if (sink) {
    for (const auto& line : done)
      sink(line);
  }
}

Expected<int32_t> kv_cache_type_id(const std::string& name) {
  struct Entry {
    const char* name;
    int32_t id;
  };
  static constexpr std::array k_types = {
      Entry{"f32", 0},  Entry{"f16", 1},  Entry{"q4_0", 2},  Entry{"q4_1", 3},    Entry{"q5_0", 6},
      Entry{"q5_1", 7}, Entry{"q8_0", 8}, Entry{"bf16", 30}, Entry{"iq4_nl", 20},
  };
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  for (const auto& t : k_types) {
    if (lower == t.name) return t.id;
  }
  return fail(ErrorKind::usage,
              fmt::format("unknown KV cache type '{}' (accepted: f32, f16, bf16, q8_0, q4_0, "
                          "q4_1, q5_0, q5_1, iq4_nl)",
                          name));
}

}  // namespace kvprof::llama
