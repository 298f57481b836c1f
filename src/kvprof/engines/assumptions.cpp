// What a plan assumed (see assumptions.hpp).
#include "kvprof/engines/assumptions.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "kvprof/engines/llamacpp/llamacpp.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/gguf.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the plan these assumptions are of

namespace {

using nlohmann::json;

// -ot's list as ["PATTERN=BUFFER_TYPE", ...], in order.
json overrides_json(const std::vector<estimate::TensorOverride>& overrides) {
  json out = json::array();
  for (const auto& o : overrides)
    out.push_back(o.pattern + "=" + o.buffer_type);
  return out;
}

json setting(json value, const AssumptionSources& src, const char* flag, const char* default_is) {
  const bool given = src.given.contains(flag);
  json j = {{"value", std::move(value)}, {"origin", given ? "given" : "default"}};
  if (!given && default_is[0] != '\0') j["default_is"] = default_is;
  return j;
}

std::string value_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{:g}", v.get<double>());
  return v.dump();
}

std::string cache_type_name(uint32_t type) {
  auto name = model::ggml_type_name(type);
  if (!name) return std::to_string(type);
  std::transform(name->begin(), name->end(), name->begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return *name;
}

// llama.cpp's own settings, by the names of its flags (the vLLM-style ones do not apply to it).
json llamacpp_settings_json(const Estimate& est, const AssumptionSources& src) {
  const auto ps = llamacpp_settings(est.settings);
  if (!ps) return json::object();
  json out = {{"ctx_size", setting(ps->n_ctx, src, "max-model-len", "llama-server's")},
              {"parallel", setting(ps->n_seq_max, src, "parallel", "")},
              {"batch_size", setting(ps->n_batch, src, "batch-size", "")},
              {"ubatch_size", setting(ps->n_ubatch, src, "ubatch-size", "")},
              {"flash_attn", setting(ps->flash_attn ? "on" : "off", src, "flash-attn", "")},
              {"cache_type_k", setting(cache_type_name(ps->type_k), src, "cache-type-k", "")},
              {"cache_type_v", setting(cache_type_name(ps->type_v), src, "cache-type-v", "")},
              {"n_gpu_layers", setting(ps->has_gpu ? ps->n_gpu_layers : 0, src, "n-gpu-layers",
                                       ps->has_gpu ? "all (-1)" : "none without a GPU")},
              {"mmap", setting(ps->use_mmap, src, "no-mmap", "")},
              {"swa_full", setting(ps->swa_full, src, "swa-full", "")},
              {"kv_unified", setting(ps->kv_unified, src, "no-kv-unified", "")},
              {"tensor_split", setting(json(ps->tensor_split), src, "tensor-split", "one GPU")},
              {"tensor_overrides", setting(overrides_json(ps->tensor_overrides), src,
                                           src.given.contains("cpu-moe")     ? "cpu-moe"
                                           : src.given.contains("n-cpu-moe") ? "n-cpu-moe"
                                                                             : "override-tensor",
                                           "none: -ngl places every tensor")}};
  // What --fit chose for the settings not given.
  if (est.llamacpp && !est.llamacpp->fit_args.empty()) {
    for (const char* name : {"ctx_size", "n_gpu_layers", "tensor_overrides"}) {
      if (out[name].value("origin", "") == "default") out[name]["origin"] = "fit";
    }
  }
  return out;
}

}  // namespace

std::string_view gpu_origin_name(GpuOrigin origin) {
  switch (origin) {
    case GpuOrigin::given:
      return "given";
    case GpuOrigin::detected:
      return "detected";
    case GpuOrigin::simulated:
      return "simulated";
    case GpuOrigin::assumed:
      break;
  }
  return "assumed";
}

json estimate_assumptions(const Estimate& est, const AssumptionSources& src) {
  const auto& s = est.settings;
  json gpu = {{"id", est.gpu.id},
              {"name", est.gpu.name},
              {"memory_bytes", est.gpu.memory_bytes},
              {"origin", gpu_origin_name(src.gpu_origin)}};
  if (!src.gpu_note.empty()) gpu["note"] = src.gpu_note;
  json settings = {
      {"gpu_memory_utilization",
       setting(est.engine_report.memory_fraction, src, "gpu-memory-utilization", "")},
      {"max_model_len", setting(s.max_model_len ? json(*s.max_model_len) : json(nullptr), src,
                                "max-model-len", "the model's")},
      {"dtype", setting(std::string(model::dtype_name(est.compute_dtype)), src, "dtype",
                        "the checkpoint's")},
      {"kv_cache_dtype", setting(std::string(kv_cache_dtype_name(s.kv_cache_dtype)), src,
                                 "kv-cache-dtype", "the model dtype")},
      {"tensor_parallel_size", setting(s.tensor_parallel_size, src, "tensor-parallel-size", "")},
      {"pipeline_parallel_size",
       setting(s.pipeline_parallel_size, src, "pipeline-parallel-size", "")},
      {"quantization", setting(est.quantization, src, "quantization", "the checkpoint's")},
      {"max_num_seqs",
       setting(s.max_num_seqs ? json(*s.max_num_seqs) : json(nullptr), src, "max-num-seqs", "")},
      {"max_num_batched_tokens",
       setting(s.max_num_batched_tokens ? json(*s.max_num_batched_tokens) : json(nullptr), src,
               "max-num-batched-tokens", "")},
      {"block_size",
       setting(s.block_size ? json(*s.block_size) : json(nullptr), src, "block-size", "")},
      {"enforce_eager", setting(s.enforce_eager, src, "enforce-eager", "")}};
  // Ollama plans the llama.cpp it runs: the same settings.
  if (s.engine == engines::Engine::llamacpp || s.engine == engines::Engine::ollama)
    settings = llamacpp_settings_json(est, src);
  return {{"gpu", gpu},
          {"model", est.model_id},
          {"engine", engines::engine_name(s.engine)},
          {"engine_version_modelled", modelled_engine_version(s)},
          {"settings", settings}};
}

std::string assumptions_text(const json& a) {
  if (!a.is_object() || !a.contains("gpu")) return "";
  const json& gpu = a["gpu"];
  std::string out =
      fmt::format("estimate assumed: GPU {} ({:.1f} GiB, {}{}); {} as kvprof models {}",
                  gpu.value("name", ""), bytes_to_gib(gpu.value("memory_bytes", uint64_t{0})),
                  gpu.value("origin", ""), gpu.contains("note") ? ": " + gpu.value("note", "") : "",
                  a.value("engine", ""), a.value("engine_version_modelled", ""));
  const json settings = a.value("settings", json::object());
  for (const auto& [name, s] : settings.items()) {
    if (s.at("value").is_null()) continue;
    out += fmt::format("; {} {}{}", name, value_text(s.at("value")),
                       s.value("origin", "") == "given" ? ""
                       : s.value("origin", "") == "fit" ? " (--fit)"
                                                        : " (default)");
  }
  return out + "\n";
}

Expected<PlanDevice> plan_device(const estimate::EngineSettings& settings, std::string_view given,
                                 const std::optional<std::string>& found,
                                 std::string_view fallback) {
  if (!given.empty()) return PlanDevice{std::string(given), GpuOrigin::given, ""};
  const bool in_catalog = found && gpu::find_gpu(*found).has_value();
  if (settings.engine == Engine::llamacpp) {
    if (settings.n_gpu_layers == 0u)
      return PlanDevice{"cpu", GpuOrigin::given, "-ngl 0: planned on the CPU (host RAM)"};
    if (!in_catalog) {
      return PlanDevice{"cpu", GpuOrigin::detected,
                        found ? fmt::format("'{}' is not in kvprof's GPU catalog: llama.cpp "
                                            "planned on the CPU (host RAM)",
                                            *found)
                              : std::string("no GPU found here: llama.cpp planned on the CPU "
                                            "(host RAM)")};
    }
  }
  if (in_catalog) {
    return PlanDevice{gpu::find_gpu(*found)->id, GpuOrigin::detected,
                      fmt::format("'{}' found here", *found)};
  }
  const std::string why = found ? fmt::format("'{}' is not in kvprof's GPU catalog", *found)
                                : std::string("no GPU found here");
  if (fallback.empty()) {
    return fail(ErrorKind::not_found,
                fmt::format("{} to plan {} for", why, engine_row(settings.engine).display_name));
  }
  return PlanDevice{std::string(fallback), GpuOrigin::assumed,
                    fmt::format("{}: planned for an {}", why, fallback)};
}

}  // namespace kvprof::engines
