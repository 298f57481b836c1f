// memory_breakdown: the one call into libllama's C++ ABI.
#include "kvprof/llama/memory.hpp"

#include <dlfcn.h>

#include <map>

namespace kvprof::llama {
namespace {

// llama_memory_breakdown_data of llama.cpp 0.5.x.
struct BreakdownData {
  size_t model = 0;
  size_t context = 0;
  size_t compute = 0;
};
using Breakdown = std::map<void*, BreakdownData>;
using BreakdownFn = Breakdown (*)(const abi::Context*);
using BuftNameFn = const char* (*)(void*);

}  // namespace

std::vector<BufferMemory> memory_breakdown(const LlamaLib& lib, const LlamaContext& ctx) {
  void* handle = dlopen(lib.info().library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return {};
  auto breakdown = reinterpret_cast<BreakdownFn>(
      dlsym(handle, "_Z26llama_get_memory_breakdownPK13llama_context"));
  auto buft_name = reinterpret_cast<BuftNameFn>(dlsym(handle, "ggml_backend_buft_name"));
  std::vector<BufferMemory> out;
  if (breakdown != nullptr && buft_name != nullptr && ctx.raw() != nullptr) {
    for (const auto& [buft, data] : breakdown(ctx.raw())) {
      const char* name = buft != nullptr ? buft_name(buft) : nullptr;
      out.push_back({name != nullptr ? name : "?", data.model, data.context, data.compute});
    }
  }
  dlclose(handle);  // drops the reference RTLD_NOLOAD took
  return out;
}

}  // namespace kvprof::llama
