// Ollama: llama.cpp's plan under Ollama's settings, and Ollama's own estimate of it (llm/memory.go
// EstimateGPULayers, v0.1.45 - v0.12.10, and the figures v0.12.11 - v0.24 synthesize from the
// same formulas), which decides how many layers it offloads before llama.cpp allocates anything.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include "kvprof/engines/llamacpp/llamacpp.hpp"
#include "kvprof/engines/ollama/ollama.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner below every engine

namespace {

constexpr uint64_t k_ollama_mib = 1ULL << 20;
constexpr uint64_t k_ollama_gib = 1ULL << 30;
constexpr uint64_t k_ollama_minimum_memory = 457 * k_ollama_mib;  // per CUDA GPU (MinimumMemory)
constexpr uint32_t k_ollama_num_batch = 512;

// format.HumanBytes2: binary units, one decimal ("560.0 MiB", "6.2 GiB", "0 B").
std::string human_bytes2(uint64_t b) {
  const auto v = static_cast<double>(b);
  if (b >= k_ollama_gib) return fmt::format("{:.1f} GiB", v / static_cast<double>(k_ollama_gib));
  if (b >= k_ollama_mib) return fmt::format("{:.1f} MiB", v / static_cast<double>(k_ollama_mib));
  if (b >= 1024) return fmt::format("{:.1f} KiB", v / 1024.0);
  return fmt::format("{} B", b);
}

// format.HumanBytes, as `ollama ps` prints SIZE: decimal units, whole from 10 on.
std::string human_bytes(uint64_t b) {
  double value = static_cast<double>(b);
  std::string_view unit = "B";
  for (const auto& [scale, name] : {std::pair{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "KB"}}) {
    if (value >= scale) {
      value /= scale;
      unit = name;
      break;
    }
  }
  if (unit == "B") return fmt::format("{} B", b);
  if (value >= 10 || value == std::trunc(value))
    return fmt::format("{} {}", static_cast<uint64_t>(value), unit);
  return fmt::format("{:.1f} {}", value, unit);
}

// Ollama's settings for a release: what it passes the llama.cpp it runs.
struct OllamaSettings {
  uint32_t num_ctx = 2048;
  uint32_t num_parallel = 1;
  bool parallel_auto = false;  // OLLAMA_NUM_PARALLEL unset where Ollama picks (4 or 2, else 1)
  bool flash_attn = false;
  std::string kv_cache_type;  // OLLAMA_KV_CACHE_TYPE as applied ("" = f16)
  std::optional<uint32_t> num_gpu;
  uint64_t gpu_overhead_bytes = 0;  // OLLAMA_GPU_OVERHEAD as applied (from v0.3.10)
};

// Architectures whose flash attention Ollama turns on by default from the release given
// (fs/ggml/ggml.go FlashAttention()).
bool flash_attn_by_default(const OllamaRelease& r, std::string_view model_type) {
  if (r.at_least(0, 13, 4)) return true;  // llama.cpp's own auto, on for CUDA
  if (!r.at_least(0, 12, 4)) return false;
  if (model_type == "gpt_oss" || model_type == "qwen3" || model_type == "qwen3_moe") return true;
  if (model_type == "gemma3" || model_type == "gemma3_text") return r.at_least(0, 12, 6);
  if (model_type.starts_with("qwen3_vl")) return r.at_least(0, 12, 8);
  return false;
}

// num_ctx when not given: 2048, 4096 from v0.6.7, by the GPU's memory from v0.15.5; never more
// than the model's own context.
uint32_t default_num_ctx(const OllamaRelease& r, const EstimateInput& in) {
  uint32_t ctx = r.at_least(0, 6, 7) ? 4096 : 2048;
  if (r.at_least(0, 15, 5) && !in.settings.no_gpu) {
    const uint64_t vram = in.gpu.memory_bytes;
    ctx = vram >= 47 * k_ollama_gib ? 262144 : vram >= 23 * k_ollama_gib ? 32768 : 4096;
  }
  const uint64_t model_ctx = in.model.max_position_embeddings;
  return model_ctx > 0 && model_ctx < ctx ? static_cast<uint32_t>(model_ctx) : ctx;
}

Expected<OllamaSettings> ollama_settings(const OllamaRelease& r, const EstimateInput& in,
                                         std::vector<std::string>& warnings) {
  const EngineSettings& s = in.settings;
  OllamaSettings o;
  if (s.max_model_len) {
    if (*s.max_model_len == 0 || *s.max_model_len > (1U << 24)) {
      return fail(ErrorKind::usage, "num_ctx: between 1 and 16M tokens");
    }
    o.num_ctx = static_cast<uint32_t>(*s.max_model_len);
  } else {
    o.num_ctx = default_num_ctx(r, in);
  }
  if (s.n_parallel_given) {
    o.num_parallel = std::max(1U, s.n_parallel);
  } else if (r.at_least(0, 2, 0) && !r.at_least(0, 10, 0)) {
    o.parallel_auto = true;
    o.num_parallel = r.at_least(0, 6, 7) ? 2 : 4;
  }
  o.flash_attn = s.flash_attn_auto ? flash_attn_by_default(r, in.model.model_type) : s.flash_attn;
  // OLLAMA_KV_CACHE_TYPE: -ctk/-ctv, or --kv-cache-dtype q8_0/q4_0.
  std::string kv = s.cache_type_k.empty() ? s.cache_type_v : s.cache_type_k;
  if (kv.empty() && s.kv_cache_dtype == KvCacheDtype::q8_0) kv = "q8_0";
  if (kv.empty() && s.kv_cache_dtype == KvCacheDtype::q4_0) kv = "q4_0";
  if (!kv.empty() && to_lower(kv) != "f16") {
    if (!r.at_least(0, 5, 0)) {
      warnings.push_back(
          fmt::format("OLLAMA_KV_CACHE_TYPE: Ollama {} has none (from v0.5.0): f16", r.name()));
    } else if (!o.flash_attn) {
      warnings.push_back(
          "OLLAMA_KV_CACHE_TYPE: Ollama applies a quantized cache only with flash attention "
          "(OLLAMA_FLASH_ATTENTION=1): f16");
    } else if (to_lower(kv) != "q8_0" && to_lower(kv) != "q4_0") {
      return fail(ErrorKind::usage,
                  fmt::format("OLLAMA_KV_CACHE_TYPE: '{}' (f16, q8_0 or q4_0)", kv.substr(0, 32)));
    } else {
      o.kv_cache_type = to_lower(kv);
    }
  }
  if (s.n_gpu_layers) o.num_gpu = *s.n_gpu_layers;
  if (s.ollama_gpu_overhead_bytes > 0) {
    if (!r.at_least(0, 3, 10)) {
      warnings.push_back(fmt::format(
          "OLLAMA_GPU_OVERHEAD: Ollama {} has none (from v0.3.10): nothing reserved", r.name()));
    } else if (r.at_least(0, 30, 0)) {
      warnings.push_back(fmt::format(
          "OLLAMA_GPU_OVERHEAD: not planned for Ollama {}, whose llama-server fits the layers",
          r.name()));
    } else {
      o.gpu_overhead_bytes = s.ollama_gpu_overhead_bytes;
    }
  }
  return o;
}

// The llama.cpp settings Ollama gives the runner for `o` (the cache of num_ctx per slot, the
// batch, flash attention, the cache type); the layers are set by the caller.
EngineSettings runner_settings(const OllamaRelease& r, const EstimateInput& in,
                               const OllamaSettings& o) {
  EngineSettings s = in.settings;
  s.engine = Engine::llamacpp;
  s.engine_version = fmt::format("b{}", r.llamacpp_build);
  s.max_model_len = uint64_t{o.num_ctx} * o.num_parallel;
  s.ctx_of_model = false;
  s.n_parallel = o.num_parallel;
  // llama.cpp's server took --batch-size 512 (to v0.3.x); the Go runner a batch of 512 per slot
  // (v0.4 - v0.24); llama-server -b 512 -ub 512 from v0.30.
  const bool go_runner = r.at_least(0, 4, 0) && !r.at_least(0, 30, 0);
  s.n_batch = go_runner ? k_ollama_num_batch * o.num_parallel : k_ollama_num_batch;
  s.n_ubatch = k_ollama_num_batch;
  s.flash_attn = o.flash_attn;
  s.flash_attn_auto = false;
  s.cache_type_k = o.kv_cache_type;
  s.cache_type_v = o.kv_cache_type;
  s.kv_cache_dtype = KvCacheDtype::auto_;
  s.fit = r.at_least(0, 30, 0) && !o.num_gpu;  // llama-server fits the layers itself
  s.n_gpu_layers = o.num_gpu;
  return s;
}

// Ollama's estimate (llm/memory.go): per-layer weights and KV, its graph figures, the layers it
// offloads to one GPU.
struct OllamaEstimate {
  uint32_t layers_model = 0;            // repeating layers + the output layer
  uint32_t layers_offload = 0;          // of those, on the GPU (what it passes as --n-gpu-layers)
  uint64_t layer_bytes = 0;             // one repeating layer's weights (the average)
  std::vector<uint64_t> layer_weights;  // each layer's, where the model lists its tensors
  uint64_t output_bytes = 0;            // the output layer's
  uint64_t kv_bytes = 0;                // all layers' cache
  uint64_t graph_full_bytes = 0;
  uint64_t graph_partial_bytes = 0;
  bool graph_from_llamacpp = false;     // no closed form of Ollama's for the architecture
  uint64_t required_partial_bytes = 0;  // on the GPU (memory.required.partial)
  uint64_t required_full_bytes = 0;     // in all (memory.required.full, `ollama ps` SIZE)
  uint64_t available_bytes = 0;
};

// Ollama's KV bytes per element for its cache types (kvCacheBytesPerElement).
double kv_bytes_per_element(const std::string& type) {
  if (type == "q8_0") return 1.0;
  if (type == "q4_0") return 0.5;
  return 2.0;
}

// GraphSize's closed form for the llama family (llama, mistral): {full, partial} bytes.
std::pair<uint64_t, uint64_t> llama_graph(const model::ModelSpec& m, uint64_t context) {
  const uint64_t b = k_ollama_num_batch;
  const uint64_t E = m.hidden_size;
  const uint64_t H = m.n_head;
  const uint64_t Hkv = m.n_head_kv;
  const uint64_t Dh = m.head_dim;
  const uint64_t V = m.vocab_size;
  const uint64_t C = context;
  const uint64_t full = std::max(4 * b * (1 + 4 * E + C * (1 + H)), 4 * b * (E + V));
  const uint64_t partial = 4 * b * E + std::max(4 * b * (1 + E + std::max(C, E)) + E * E * 9 / 16 +
                                                    4 * C * (b * H + Dh * Hkv),
                                                4 * b * (E + V) + E * V * 105 / 128);
  return {full, partial};
}

Expected<OllamaEstimate> ollama_estimate(const EstimateInput& in, const model::ModelSpec& m,
                                         const OllamaSettings& o, const EngineSettings& runner) {
  OllamaEstimate e;
  // Weights per layer and of the output layer as llama.cpp places them (the same GGUF tensors
  // Ollama sums): every layer on the GPU, then the output layer too.
  auto ps = llamacpp_settings(runner);
  if (!ps) return std::unexpected(ps.error());
  ps->has_gpu = true;
  ps->tensor_overrides.clear();
  ps->n_gpu_layers = static_cast<int32_t>(m.n_layer);
  const auto layers = plan_llamacpp(m, *ps);
  if (!layers) return std::unexpected(layers.error());
  ps->n_gpu_layers = static_cast<int32_t>(m.n_layer + 1);
  const auto all = plan_llamacpp(m, *ps);
  if (!all) return std::unexpected(all.error());
  e.layers_model = m.n_layer + 1;
  e.layer_bytes = layers->model_gpu_bytes / std::max(1U, m.n_layer);
  // A GGUF's (or a llama-quantize mix's) own tensors: each layer's bytes, which a mix varies
  // (Q4_K_M's more bits in the first and last layers).
  e.layer_weights.assign(m.n_layer, e.layer_bytes);
  if (!m.tensors.empty()) {
    std::vector<uint64_t> sums(m.n_layer, 0);
    for (const auto& t : m.tensors) {
      if (!t.name.starts_with("blk.")) continue;
      uint32_t il = 0;
      const auto [p, ec] = std::from_chars(t.name.data() + 4, t.name.data() + t.name.size(), il);
      if (ec == std::errc{} && il < m.n_layer) sums[il] += t.bytes;
    }
    if (std::all_of(sums.begin(), sums.end(), [](uint64_t b) { return b > 0; })) {
      e.layer_weights = sums;
    }
  }
  e.output_bytes = all->model_gpu_bytes - layers->model_gpu_bytes;
  const uint64_t context = uint64_t{o.num_ctx} * o.num_parallel;
  e.kv_bytes = static_cast<uint64_t>(2.0 * static_cast<double>(context) * m.n_layer * m.head_dim *
                                     m.n_head_kv * kv_bytes_per_element(o.kv_cache_type));
  if (m.model_type == "llama" || m.model_type == "mistral") {
    std::tie(e.graph_full_bytes, e.graph_partial_bytes) = llama_graph(m, context);
  } else {
    e.graph_full_bytes = e.graph_partial_bytes = all->compute.gpu_bytes;
    e.graph_from_llamacpp = true;
  }
  const uint64_t kv_layer = e.kv_bytes / std::max(1U, m.n_layer);
  const uint64_t spare = e.layer_weights.front() + kv_layer;  // blk.0 and its cache
  e.available_bytes = in.gpu.memory_bytes;
  const uint64_t graph = std::max(e.graph_full_bytes, e.graph_partial_bytes);
  uint64_t alloc = k_ollama_minimum_memory + spare;  // one layer spare
  uint32_t placed = 0;
  uint64_t overflow = 0;
  // OLLAMA_GPU_OVERHEAD is kept free beside every figure (FreeMemory > overhead + used + ...).
  const uint64_t overhead = o.gpu_overhead_bytes;
  const bool usable = e.available_bytes >= overhead + graph + k_ollama_minimum_memory + 2 * spare;
  for (uint32_t i = 0; i < m.n_layer; ++i) {
    const uint64_t layer = e.layer_weights[i] + kv_layer;
    if (usable && placed == i && (!o.num_gpu || placed < *o.num_gpu) &&
        e.available_bytes > overhead + alloc + graph + layer) {
      alloc += layer;
      ++placed;
    } else {
      overflow += layer;
    }
  }
  const bool fully = placed >= m.n_layer;
  if (usable && fully && (!o.num_gpu || placed < *o.num_gpu) &&
      e.available_bytes > overhead + alloc + graph + e.output_bytes) {
    alloc += e.output_bytes;
    ++placed;
  } else {
    overflow += e.output_bytes;
  }
  e.layers_offload = placed;
  if (placed > 0) {
    e.required_partial_bytes = alloc + (fully ? e.graph_full_bytes : e.graph_partial_bytes);
  }
  e.required_full_bytes = e.required_partial_bytes + overflow;
  return e;
}

// The lines Ollama logs about the estimate and the runner it starts, in the words of its release.
std::vector<std::string> ollama_lines(const OllamaRelease& r, const OllamaSettings& o,
                                      const OllamaEstimate& e) {
  std::vector<std::string> out;
  const uint64_t ctx = uint64_t{o.num_ctx} * o.num_parallel;
  uint64_t blocks = 0;  // every repeating layer's weights
  for (const uint64_t b : e.layer_weights)
    blocks += b;
  if (r.at_least(0, 30, 0)) {
    out.push_back(
        fmt::format("msg=\"starting llama-server\" cmd=\"llama-server --model <blob> -c {} -np {} "
                    "--flash-attn {} -b 512 -ub 512{}\"",
                    ctx, o.num_parallel, o.flash_attn ? "on" : "auto",
                    o.num_gpu ? fmt::format(" -ngl {}", *o.num_gpu) : std::string()));
    return out;
  }
  const std::string fields = fmt::format(
      "layers.requested={} layers.model={} layers.offload={} layers.split=\"\" "
      "memory.available=\"[{}]\"{} memory.required.full=\"{}\" memory.required.partial=\"{}\" "
      "memory.required.kv=\"{}\" memory.required.allocations=\"[{}]\" "
      "memory.weights.total=\"{}\" memory.weights.repeating=\"{}\" "
      "memory.weights.nonrepeating=\"{}\" memory.graph.full=\"{}\" memory.graph.partial=\"{}\"",
      o.num_gpu ? static_cast<int64_t>(*o.num_gpu) : -1, e.layers_model, e.layers_offload,
      human_bytes2(e.available_bytes),
      r.at_least(0, 3, 10)
          ? fmt::format(" memory.gpu_overhead=\"{}\"", human_bytes2(o.gpu_overhead_bytes))
          : std::string(),
      human_bytes2(e.required_full_bytes), human_bytes2(e.required_partial_bytes),
      human_bytes2(e.kv_bytes), human_bytes2(e.required_partial_bytes),
      // To v0.6.0 the total held each layer's cache and not the output layer, "repeating" the
      // total less the output layer.
      human_bytes2(r.at_least(0, 6, 1) ? blocks + e.output_bytes : blocks + e.kv_bytes),
      human_bytes2(r.at_least(0, 6, 1) ? blocks : blocks + e.kv_bytes - e.output_bytes),
      human_bytes2(e.output_bytes), human_bytes2(e.graph_full_bytes),
      human_bytes2(e.graph_partial_bytes));
  if (r.at_least(0, 12, 11)) {
    // The synthesized per-device figures (llm/server.go llamaServer.Load, ml/device.go).
    const bool fully = e.layers_offload >= e.layers_model - 1;
    const uint32_t on_gpu = std::min(e.layers_offload, e.layers_model - 1);
    const uint64_t kv_gpu = e.kv_bytes / (e.layers_model - 1) * on_gpu;
    const uint64_t weights_gpu =
        std::accumulate(e.layer_weights.begin(), e.layer_weights.begin() + on_gpu, uint64_t{0}) +
        (e.layers_offload > on_gpu ? e.output_bytes : 0);
    const uint64_t graph = fully ? e.graph_full_bytes : e.graph_partial_bytes;
    out.push_back(
        fmt::format("msg=\"model weights\" device=CUDA0 size=\"{}\"", human_bytes2(weights_gpu)));
    out.push_back(fmt::format("msg=\"kv cache\" device=CUDA0 size=\"{}\"", human_bytes2(kv_gpu)));
    out.push_back(
        fmt::format("msg=\"compute graph\" device=CUDA0 size=\"{}\"", human_bytes2(graph)));
    out.push_back(fmt::format("msg=\"total memory\" size=\"{}\"",
                              human_bytes2(e.required_full_bytes - k_ollama_minimum_memory)));
  } else {
    out.push_back(r.at_least(0, 5, 12) ? "msg=offload library=cuda " + fields
                                       : "msg=\"offload to cuda\" " + fields);
  }
  const std::string fa = o.flash_attn ? " --flash-attn" : "";
  const std::string kv = o.kv_cache_type.empty() ? "" : " --kv-cache-type " + o.kv_cache_type;
  if (r.at_least(0, 11, 5)) {
    out.push_back(fmt::format(
        "msg=load request=\"{{Operation:commit Parallel:{} BatchSize:512 FlashAttention:{} "
        "KvSize:{} KvCacheType:{} GPULayers:{}}}\"",
        o.num_parallel, o.flash_attn ? "Enabled" : "Disabled", ctx, o.kv_cache_type,
        e.layers_offload));
  } else {
    out.push_back(fmt::format(
        "msg=\"starting llama server\" cmd=\"{} --model <blob> --ctx-size {} --batch-size {} "
        "--n-gpu-layers {}{}{} --parallel {}\"",
        r.at_least(0, 4, 0) ? "ollama runner" : "ollama_llama_server", ctx,
        std::min<uint64_t>(k_ollama_num_batch, ctx), e.layers_offload, fa, kv, o.num_parallel));
  }
  return out;
}

// `ollama ps`'s PROCESSOR column for an estimate.
std::string ps_processor(const OllamaEstimate& e) {
  if (e.required_partial_bytes == 0) return "100% CPU";
  if (e.required_partial_bytes >= e.required_full_bytes) return "100% GPU";
  const auto cpu = static_cast<int>(
      std::lround(100.0 * static_cast<double>(e.required_full_bytes - e.required_partial_bytes) /
                  static_cast<double>(e.required_full_bytes)));
  return fmt::format("{}%/{}% CPU/GPU", cpu, 100 - cpu);
}

}  // namespace

Expected<Estimate> estimate_ollama(const EstimateInput& in) {
  auto release = parse_ollama_release(in.settings.engine_version);
  if (!release) return std::unexpected(release.error());
  const OllamaRelease& r = *release;
  const EngineSettings& s = in.settings;
  if (s.tensor_parallel_size * s.pipeline_parallel_size * s.data_parallel_size != 1) {
    return fail(ErrorKind::usage,
                "Ollama splits layers over the GPUs it finds itself: no -tp, -pp or -dp");
  }
  if (!s.tensor_overrides.empty()) {
    return fail(ErrorKind::usage,
                "Ollama takes no -ot, --cpu-moe or --n-cpu-moe (plan llama-server with "
                "--engine llamacpp)");
  }
  std::vector<std::string> warnings;
  auto o = ollama_settings(r, in, warnings);
  if (!o) return std::unexpected(o.error());
  auto m = llamacpp_model(in);
  if (!m) return std::unexpected(m.error());

  EstimateInput runner_in = in;
  runner_in.settings = runner_settings(r, in, *o);
  std::optional<OllamaEstimate> oe;
  if (!s.no_gpu && !r.at_least(0, 30, 0)) {
    auto e = ollama_estimate(in, *m, *o, runner_in.settings);
    if (!e) return std::unexpected(e.error());
    // OLLAMA_NUM_PARALLEL unset: the scheduler keeps 4 (2 from v0.6.7) slots only where the
    // model then fits the GPU whole, else 1.
    if (o->parallel_auto && e->required_partial_bytes < e->required_full_bytes) {
      o->num_parallel = 1;
      runner_in.settings = runner_settings(r, in, *o);
      e = ollama_estimate(in, *m, *o, runner_in.settings);
      if (!e) return std::unexpected(e.error());
    }
    oe = *e;
    runner_in.settings.n_gpu_layers = e->layers_offload;
  }
  auto est = estimate_llamacpp(runner_in);
  if (!est) return std::unexpected(est.error());

  std::vector<std::string> lines;
  if (oe)
    lines = ollama_lines(r, *o, *oe);
  else if (!s.no_gpu)
    lines = ollama_lines(r, *o, OllamaEstimate{});
  auto& log = est->engine_report.log_lines;
  log.insert(log.begin(), lines.begin(), lines.end());
  est->settings.engine = Engine::ollama;
  est->settings.engine_version = r.name();
  est->warnings.insert(est->warnings.end(), warnings.begin(), warnings.end());
  est->notes.insert(
      est->notes.begin(),
      fmt::format("Ollama {} runs llama.cpp b{}: num_ctx {} x {} slot{} (OLLAMA_NUM_PARALLEL{}) "
                  "= a cache of {} cells, a batch of {}, flash attention {}{}",
                  r.name(), r.llamacpp_build, o->num_ctx, o->num_parallel,
                  o->num_parallel == 1 ? "" : "s", o->parallel_auto ? ", its automatic choice" : "",
                  uint64_t{o->num_ctx} * o->num_parallel, runner_in.settings.n_batch,
                  o->flash_attn ? "on" : "off",
                  o->kv_cache_type.empty() ? "" : ", a " + o->kv_cache_type + " cache"));
  if (oe) {
    const uint64_t allocated =
        est->per_gpu.weights_bytes + est->per_gpu.kv_cache_bytes + est->per_gpu.activation_bytes;
    est->notes.push_back(fmt::format(
        "Ollama's own estimate offloads {} of {} layers; `ollama ps` shows SIZE {} and {}. It "
        "is {:.2f} GiB {} the buffers llama.cpp allocates on the GPU ({:.2f} GiB): Ollama adds "
        "{} MiB per GPU and one spare layer ({:.0f} MiB){}",
        oe->layers_offload, oe->layers_model, human_bytes(oe->required_full_bytes),
        ps_processor(*oe),
        std::abs(static_cast<double>(oe->required_partial_bytes) - static_cast<double>(allocated)) /
            static_cast<double>(k_ollama_gib),
        oe->required_partial_bytes >= allocated ? "above" : "below",
        static_cast<double>(allocated) / static_cast<double>(k_ollama_gib),
        k_ollama_minimum_memory >> 20,
        static_cast<double>(oe->layer_weights.front() + oe->kv_bytes / std::max(1U, m->n_layer)) /
            static_cast<double>(k_ollama_mib),
        oe->graph_from_llamacpp
            ? "; its graph figure for this architecture is not modelled (llama.cpp's compute "
              "buffer stands in)"
            : ""));
  } else if (r.at_least(0, 30, 0) && !s.no_gpu) {
    est->notes.push_back(fmt::format(
        "Ollama {} passes no -ngl: llama-server's --fit places the layers (planned as it does)",
        r.name()));
  }
  return est;
}

}  // namespace kvprof::engines
