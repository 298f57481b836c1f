// The shared llama.cpp engine flags of the in-process commands (see bench_options.hpp).
#include "kvprof/cli/bench_options.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "kvprof/engines/llamacpp/tensor_overrides.hpp"
#include "kvprof/gpu/nvml.hpp"

namespace kvprof::cli {

CLI::App* add_bench_engine_options(CLI::App* cmd, bench::BenchConfig& c, BenchEngineFlags& flags,
                                   const std::string& group) {
  auto& e = c.engine;
  CLI::App* g = group.empty() ? cmd : cmd->add_option_group(group);
  g->add_option("-c,--ctx-size", e.n_ctx,
                "Context cells (all sequences); default: sized for each condition")
      ->each([&c](const std::string&) { c.ctx_from_user = true; });
  g->add_option("--parallel", e.n_seq_max, "Sequences (slots); default: each concurrency")
      ->each([&c](const std::string&) { c.parallel_from_user = true; });
  g->add_option("-b,--batch-size", e.n_batch, "Logical batch size")->capture_default_str();
  g->add_option("--ubatch-size", e.n_ubatch, "Physical batch size")->capture_default_str();
  g->add_option("--flash-attn", flags.flash_attn, "on | off | auto (bare -fa: on)")
      ->expected(0, 1)
      ->capture_default_str();
  g->add_option("--cache-type-k", e.cache_type_k, "K cache type")->capture_default_str();
  g->add_option("--cache-type-v", e.cache_type_v, "V cache type")->capture_default_str();
  g->add_option("--n-gpu-layers,--gpu-layers", e.n_gpu_layers,
                "Layers on the GPU (-1 = all; CPU builds ignore it)")
      ->capture_default_str();
  g->add_option("-t,--threads", e.n_threads, "CPU threads (0 = every core)")->capture_default_str();
  g->add_flag("--no-mmap", flags.no_mmap, "Read the model into memory instead of mapping it");
  g->add_flag("--swa-full", flags.swa_full,
              "Sliding-window layers keep a cache of all -c cells (llama-server's --swa-full)");
  g->add_flag("--kv-unified,!--no-kv-unified", e.kv_unified,
              "One KV buffer shared by every sequence (llama-server's default); "
              "--no-kv-unified gives each of the --parallel sequences -c / --parallel cells");
  g->add_option("--seed", c.seed, "Seed of the prompt tokens")->capture_default_str();
  g->add_option("--llama-lib", c.library.path,
                "libllama.so or its folder (default: KVPROF_LLAMA_LIB, then .deps/llama/); "
                "llama.cpp v0.4.0 and later (npm's @node-llama-cpp/linux-x64 3.21.1 on), an "
                "older release is refused");
  g->add_option(
       "--override-tensor,--ot", flags.override_tensor,
       "PATTERN=BUFFER_TYPE[,...]: tensors whose name matches the regular expression go to "
       "that buffer type (CPU, CUDA0), the first match deciding; as llama.cpp's -ot")
      ->type_name("PATTERN=BUFT");
  g->add_flag("--cpu-moe,--cmoe", flags.cpu_moe, "Every MoE layer's experts in host memory");
  g->add_option("--n-cpu-moe,--ncmoe", flags.n_cpu_moe,
                "The experts of the first N layers in host memory");
  g->add_option("--gpu-source", flags.gpu_source, "auto | nvml | none")
      ->check(CLI::IsMember({"auto", "nvml", "none"}))
      ->capture_default_str();
  return g;
}

bool any_bench_engine_option_given(const CLI::App* where) {
  const auto options = where->get_options();
  return std::any_of(options.begin(), options.end(), [](const CLI::Option* o) {
    return o->count() > 0 && o->get_name() != "--help";
  });
}

void apply_bench_engine_flags(const BenchEngineFlags& flags, bench::BenchConfig& config) {
  auto& e = config.engine;
  e.flash_attn =
      value_or_fatal(llama::parse_flash_attn(flags.flash_attn.empty() ? "on" : flags.flash_attn));
  e.use_mmap = !flags.no_mmap;
  e.swa_full = flags.swa_full;
  // -ot, --cpu-moe, --n-cpu-moe in llama.cpp's order (common/arg.cpp): each -ot as given, then
  // --cpu-moe, then --n-cpu-moe.
  std::vector<estimate::TensorOverride> overrides;
  for (const auto& value : flags.override_tensor) {
    auto parts = value_or_fatal(engines::parse_override_tensor(value));
    overrides.insert(overrides.end(), parts.begin(), parts.end());
  }
  if (flags.cpu_moe) overrides.push_back(engines::cpu_moe_override());
  if (flags.n_cpu_moe) {
    auto parts = value_or_fatal(engines::n_cpu_moe_overrides(*flags.n_cpu_moe));
    overrides.insert(overrides.end(), parts.begin(), parts.end());
  }
  e.tensor_overrides.clear();
  for (const auto& o : overrides)
    e.tensor_overrides.emplace_back(o.pattern, o.buffer_type);
  value_or_fatal(llama::kv_cache_type_id(e.cache_type_k));
  value_or_fatal(llama::kv_cache_type_id(e.cache_type_v));
  std::error_code ec;
  if (!std::filesystem::is_regular_file(e.model_path, ec)) {
    throw Fatal(
        {ErrorKind::not_found,
         fmt::format("no GGUF file at {} (make one with `kvprof make-gguf`)", e.model_path)});
  }
  config.model_label = e.model_path;
}

}  // namespace kvprof::cli
