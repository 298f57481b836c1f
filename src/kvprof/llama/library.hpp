// LlamaLib: llama.cpp's libllama (with libggml and its backends) loaded at run time with dlopen,
// found where the user says or where kvprof's setup puts it, checked for a parameter layout
// kvprof knows, and its log captured line by line. One per process: llama.cpp's log callback and
// backend registry are process-wide.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/llama/abi.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::llama {

// Where to look for libllama, first match wins.
struct LlamaLibOptions {
  std::string path;  // --llama-lib: the library file or its folder; empty = search
  // Extra folders searched after KVPROF_LLAMA_LIB and before the usual places (tests).
  std::vector<std::filesystem::path> extra_dirs;
};

// One compute device ggml registered (after the backends were loaded).
struct LlamaDevice {
  std::string name;         // "CPU", "CUDA0"
  std::string description;  // "AMD EPYC", "NVIDIA H100 80GB HBM3"
  std::string type;         // "cpu", "gpu", "other"
  std::optional<uint64_t> free_bytes;
  std::optional<uint64_t> total_bytes;
};

// What was loaded, for `kvprof env` and every run's manifest.
struct LlamaLibInfo {
  std::filesystem::path library;  // the libllama file
  std::string llama_version;      // llama_version(): "0.5.0-dev"
  std::string package;            // "@node-llama-cpp/linux-x64@3.22.1" when known
  std::string llama_cpp_release;  // the release the package was built from, when it says
  std::string cpu_backend;        // the CPU backend variant ggml chose ("libggml-cpu-zen4.so")
  std::string system_info;        // llama_print_system_info()
  std::vector<LlamaDevice> devices;
};

// A finished line of llama.cpp's log, with its level.
struct LlamaLogLine {
  int32_t level = abi::log_info;
  std::string text;  // without the trailing newline
};

class LlamaLib {
 public:
  // Finds, loads and checks libllama: --llama-lib, then KVPROF_LLAMA_LIB, then extra_dirs, then
  // .deps/llama/*/ above the kvprof executable, then /usr/local/lib and /usr/lib. A driver error
  // when there is none (saying where it looked and how to install it), when the library cannot
  // be loaded, lacks an entry point, or has a parameter layout this kvprof does not know.
  static Expected<std::shared_ptr<LlamaLib>> load(const LlamaLibOptions& options = {});

  ~LlamaLib();
  LlamaLib(const LlamaLib&) = delete;
  LlamaLib& operator=(const LlamaLib&) = delete;

  [[nodiscard]] const abi::Functions& fn() const { return m_fn; }
  [[nodiscard]] const LlamaLibInfo& info() const { return m_info; }

  // Default model / context parameters of the loaded library (layout already checked).
  [[nodiscard]] abi::ModelParams default_model_params() const;
  [[nodiscard]] abi::ContextParams default_context_params() const;

  // Called with every finished log line, on the thread that logged it (replaces the previous
  // sink; nullptr drops lines). Lines are also kept: up to k_kept_log_bytes, debug lines given up
  // first, so the startup's buffer lines stay however long the model's metadata dump is.
  void set_log_sink(std::function<void(const LlamaLogLine&)> sink);
  // The last `n` finished log lines (oldest first).
  [[nodiscard]] std::vector<std::string> recent_log(size_t n) const;
  // Every kept line (oldest first); without `debug` the debug lines are left out, as llama-server
  // prints its log without --verbose.
  [[nodiscard]] std::vector<std::string> kept_log(bool debug) const;
  // Devices with their current free/total memory.
  [[nodiscard]] std::vector<LlamaDevice> devices() const;

  static constexpr size_t k_kept_log_lines = 400;  // what error messages quote at most
  static constexpr size_t k_kept_log_bytes = 4ULL << 20;

 private:
  LlamaLib() = default;
  static void log_callback(int32_t level, const char* text, void* user_data);
  void on_log(int32_t level, const char* text);

  std::vector<void*> m_handles;  // dlopen handles, closed in reverse order
  abi::Functions m_fn{};
  LlamaLibInfo m_info;
  mutable std::mutex m_log_mutex;
  std::function<void(const LlamaLogLine&)> m_sink;
  std::string m_partial;  // a line still being written (ggml logs in pieces)
  int32_t m_partial_level = abi::log_info;
  std::deque<LlamaLogLine> m_kept;  // finished lines, oldest first
  size_t m_kept_bytes = 0;
};

// Candidate folders searched for libllama, in order, for `options` (what load() tries; shown in
// its not-found message).
std::vector<std::filesystem::path> llama_search_dirs(const LlamaLibOptions& options);

// The libllama file load() would use for `options`; a driver error saying where it looked and
// how to install it, or that it is a release older than kvprof drives (check_library_release).
Expected<std::filesystem::path> find_llama_library(const LlamaLibOptions& options);

// The oldest llama.cpp release whose C API and parameter layouts kvprof's loader (abi.hpp) speaks:
// v0.4.0, checked on the npm builds of v0.4.0 (@node-llama-cpp/linux-x64 3.21.1) and v0.5.0
// (3.22.1); b8121 (3.16.2), b5640 (3.10.0) and b3889 (3.1.1) lay their parameters out otherwise.
inline constexpr unsigned k_oldest_release_major = 0, k_oldest_release_minor = 4;

// Whether kvprof drives llama.cpp release `release` ("b8121", "v0.5.0", "ggml-org/llama.cpp
// v0.5.0"); nullopt when the name is neither form.
std::optional<bool> drivable_release(std::string_view release);

// Refuses, before loading it, a libllama whose package names a release older than kvprof drives
// (a driver error of one line naming the release, the package and what to fetch instead); a
// library whose release is not written beside it passes (its loading checks it).
Expected<void> check_library_release(const std::filesystem::path& library);

// The ggml type id of a KV cache type name as llama.cpp's -ctk/-ctv take it (f32, f16, bf16,
// q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl); usage error naming the accepted ones otherwise.
Expected<int32_t> kv_cache_type_id(const std::string& name);

}  // namespace kvprof::llama
