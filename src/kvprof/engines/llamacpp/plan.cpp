// llama.cpp (llama-server, llama-cli, kvprof bench): every buffer placed where libllama puts it
// (buffers.hpp), host RAM as a budget of its own, the largest -ngl and -c that fit, and
// the lines llama.cpp will log.
#include "kvprof/engines/llamacpp/llamacpp.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kvprof/engines/llamacpp/buffers.hpp"
#include "kvprof/engines/llamacpp/fit.hpp"
#include "kvprof/engines/llamacpp/tensor_overrides.hpp"
#include "kvprof/estimate/engine_common.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/estimate/weights.hpp"
#include "kvprof/model/dummy_gguf.hpp"
#include "kvprof/model/gguf.hpp"
#include "kvprof/sys/host_info.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner below every engine

namespace {

constexpr double k_mib_f = 1024.0 * 1024.0;
constexpr uint64_t k_llamacpp_cuda_context_bytes = 300ULL << 20;  // CUDA context + cuBLAS, per GPU
constexpr uint32_t k_ctx_step = 256;

double mib(uint64_t bytes) {
  return static_cast<double>(bytes) / k_mib_f;
}

// -ctk/-ctv, else --kv-cache-dtype in llama.cpp's types, else f16.
Expected<uint32_t> cache_type(const std::string& name, KvCacheDtype fallback) {
  if (!name.empty()) return parse_cache_type(name);
  switch (fallback) {
    case KvCacheDtype::auto_:
    case KvCacheDtype::f16:
      return k_ggml_type_f16;
    case KvCacheDtype::bf16:
      return 30;
    case KvCacheDtype::f32:
      return k_ggml_type_f32;
    case KvCacheDtype::q8_0:
      return 8;
    case KvCacheDtype::q4_0:
      return 2;
    default:
      return fail(ErrorKind::usage,
                  "llama.cpp has no fp8 KV cache: use --cache-type-k/-v q8_0, q4_0, f16 or bf16");
  }
}

struct Budget {
  uint64_t gpu_bytes = 0;   // 0 = no GPU
  uint64_t host_bytes = 0;  // RAM
};

// What one GPU needs: its buffers and, when it runs anything, the CUDA context.
uint64_t gpu_need(const LlamaCppDevice& d) {
  return d.total_bytes() + (d.layers > 0 || d.output ? k_llamacpp_cuda_context_bytes : 0);
}

// The GPU that needs the most (the one that decides whether the split fits); nullptr without.
const LlamaCppDevice* busiest_gpu(const LlamaCppPlan& p) {
  const LlamaCppDevice* best = nullptr;
  for (const auto& d : p.gpus) {
    if (best == nullptr || gpu_need(d) > gpu_need(*best)) best = &d;
  }
  return best;
}

uint64_t gpu_need(const LlamaCppPlan& p) {
  const LlamaCppDevice* d = busiest_gpu(p);
  return d == nullptr ? 0 : gpu_need(*d);
}

bool fits(const LlamaCppPlan& p, const Budget& b) {
  return p.host_total_bytes <= b.host_bytes && (b.gpu_bytes == 0 || gpu_need(p) <= b.gpu_bytes);
}

// Why flash attention is off on a release from before -fa auto, and what it costs: the compute
// buffer with it on.
std::string flash_attn_default_note(const model::ModelSpec& m, const LlamaCppSettings& ps,
                                    const LlamaCppPlan& p, std::string_view release) {
  LlamaCppSettings on = ps;
  on.flash_attn = true;
  const auto with_fa = plan_llamacpp(m, on);
  const uint64_t off_bytes = p.compute.host_bytes + p.compute.gpu_bytes;
  const uint64_t on_bytes = with_fa ? with_fa->compute.host_bytes + with_fa->compute.gpu_bytes : 0;
  return fmt::format(
      "flash attention off: llama.cpp {}'s default (-fa auto, on for the CPU and CUDA, is the "
      "default from b6325); the compute buffer holds every head's attention scores: {:.2f} MiB, "
      "{:.2f} MiB with -fa on (give -fa on if the backend runs it)",
      release, mib(off_bytes), mib(on_bytes));
}

// `m` as its GGUF in llama-quantize's `mix` would be: the tensors llama.cpp's converter writes,
// each of the type the mix gives it, with their exact bytes and offsets.
Expected<model::ModelSpec> as_gguf_mix(const model::ModelSpec& m, const model::GgufMix& mix) {
  if (m.origin == model::ModelSpec::Origin::gguf || m.quant.method != model::QuantMethod::none) {
    return fail(ErrorKind::usage,
                fmt::format("-q {} prices an unquantized model as its GGUF; {} is already {}",
                            mix.name, m.id, quant_name(m.quant)));
  }
  auto plan = model::plan_dummy_gguf(m, {mix.default_type, 0}, mix);
  if (!plan) return std::unexpected(plan.error().with_context("-q " + mix.name));
  model::ModelSpec out = m;
  out.tensors.clear();
  for (const auto& t : plan->writer.tensors()) {
    out.tensors.push_back({t.name, std::string(model::ggml_type_name(t.ggml_type).value_or("F16")),
                           t.shape, t.bytes, t.offset});
  }
  const auto block = model::ggml_block(mix.default_type).value_or(model::GgmlBlock{1, 2});
  out.quant = {};
  out.quant.method = model::QuantMethod::gguf;
  out.quant.weight_bits = block.block_bytes * 8 / block.block_elements;
  out.quant.group_size = static_cast<int32_t>(block.block_elements);
  out.quant.format = mix.name;
  out.quant.from_checkpoint = true;  // the tensors are exact, as the file would hold them
  return out;
}

}  // namespace

std::vector<std::string> llamacpp_log_lines(const LlamaCppPlan& p, const LlamaCppSettings& s,
                                            uint32_t n_layer) {
  const LlamaCppReleaseRules& r = *s.release;
  std::vector<std::string> out;
  if (s.has_gpu) {
    out.push_back(fmt::format("{}: offloaded {}/{} layers to GPU", r.log_weights,
                              p.gpu_layers + (p.output_on_gpu ? 1 : 0), n_layer + 1));
  }
  const auto buffer = [&](std::string_view who, std::string_view dev, std::string_view what,
                          uint64_t bytes) {
    if (bytes > 0)
      out.push_back(fmt::format("{}: {:>12} {}{}buffer size = {:8.2f} MiB", who, dev, what,
                                what.empty() ? "" : " ", mib(bytes)));
  };
  // Early releases named the weights' buffers by device only ("CPU buffer size").
  const std::string_view model = r.log_model_buffers ? "model" : "";
  buffer(r.log_weights, r.log_model_buffers ? "CPU_Mapped" : "CPU", model, p.model_mapped_bytes);
  buffer(r.log_weights, "CPU", model, p.model_host_bytes);
  buffer(r.log_weights, r.log_repack_buffer, model, p.model_repack_bytes);
  const auto per_gpu = [&](std::string_view who, std::string_view what,
                           uint64_t LlamaCppDevice::*bytes) {
    for (size_t i = 0; i < p.gpus.size(); ++i)
      buffer(who, fmt::format("CUDA{}", i), what, p.gpus[i].*bytes);
  };
  per_gpu(r.log_weights, model, &LlamaCppDevice::model_bytes);
  buffer(r.log_context, "CPU", "output", p.output_bytes);
  buffer(r.log_kv, "CPU", "KV", p.kv.host_bytes);
  per_gpu(r.log_kv, "KV", &LlamaCppDevice::kv_bytes);
  if (r.log_kv_size_line) {
    const uint32_t streams = s.kv_unified || !r.kv_streams ? 1 : std::max(1U, s.n_seq_max);
    // The cells of one stream; "K (q8_0): 1.06 MiB, V (f16): 2.00 MiB": the attention layers'
    // cache by its two parts.
    const auto type_name = [](uint32_t type) {
      std::string name = model::ggml_type_name(type).value_or("?");
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      return name;
    };
    const uint64_t kv_bytes = p.kv.host_bytes + p.kv.gpu_bytes;
    out.push_back(fmt::format(
        "{}: size = {:7.2f} MiB ({:6} cells, {:3} layers, {} seqs), K ({}): {:7.2f} MiB, V ({}): "
        "{:7.2f} MiB",
        r.log_kv, mib(kv_bytes), p.kv_cells / streams, n_layer,
        r.log_kv_streams ? fmt::format("{:2}/{}", s.n_seq_max, streams)
                         : fmt::format("{:2}", s.n_seq_max),
        type_name(s.type_k), mib(p.kv_k_bytes), type_name(s.type_v), mib(p.kv_v_bytes)));
  }
  per_gpu(r.log_compute, "compute", &LlamaCppDevice::compute_bytes);
  buffer(r.log_compute, "CPU", "compute", p.compute.host_bytes);
  return out;
}

Expected<model::ModelSpec> llamacpp_model(const EstimateInput& in) {
  if (const auto mix = model::find_gguf_mix(trim(in.settings.quantization))) {
    // An MXFP4 checkpoint (gpt-oss) quantized to MXFP4_MOE: its experts as they are, its other
    // matrices Q8_0 (the tensors are priced by their dimensions, placed_tensors).
    if (mix->default_type == model::ggml_type::mxfp4 &&
        in.model.quant.method == model::QuantMethod::mxfp4 &&
        in.model.origin != model::ModelSpec::Origin::gguf) {
      model::ModelSpec out = in.model;
      out.quant.format = mix->name;
      return out;
    }
    return as_gguf_mix(in.model, *mix);
  }
  return in.model;
}

Expected<LlamaCppSettings> llamacpp_settings(const EngineSettings& s) {
  LlamaCppSettings ps;
  ps.n_ctx = 4096;  // llama-server --ctx-size
  if (s.max_model_len) {
    if (*s.max_model_len > UINT32_MAX) return fail(ErrorKind::usage, "--ctx-size over 2^32");
    ps.n_ctx = static_cast<uint32_t>(*s.max_model_len);
  }
  auto release = parse_llamacpp_release(s.engine_version);
  if (!release) return std::unexpected(release.error());
  ps.release = release->rules;
  ps.outputs_per_slot = s.llamacpp_outputs_per_slot;
  ps.n_seq_max = std::max(1U, s.n_parallel);
  ps.n_batch = s.n_batch;
  ps.n_ubatch = s.n_ubatch;
  // -fa auto (or none): on where the release defaults to auto, off before.
  ps.flash_attn = s.flash_attn_auto ? ps.release->flash_attn_auto : s.flash_attn;
  auto tk = cache_type(s.cache_type_k, s.kv_cache_dtype);
  if (!tk) return std::unexpected(tk.error());
  auto tv =
      cache_type(s.cache_type_v, s.cache_type_k.empty() ? s.kv_cache_dtype : KvCacheDtype::f16);
  if (!tv) return std::unexpected(tv.error());
  ps.type_k = *tk;
  ps.type_v = *tv;
  ps.has_gpu = !s.no_gpu;
  ps.n_gpu_layers = s.n_gpu_layers ? static_cast<int32_t>(*s.n_gpu_layers) : -1;
  ps.use_mmap = s.use_mmap;
  ps.swa_full = s.swa_full;
  ps.op_offload = s.op_offload;
  ps.kv_unified = s.kv_unified;
  ps.tensor_split = s.tensor_split;
  // -dev over several GPUs without -ts: llama.cpp splits by their free memory, evenly here.
  if (ps.tensor_split.empty() && s.n_devices > 1) ps.tensor_split.assign(s.n_devices, 0.0);
  ps.tensor_overrides = s.tensor_overrides;
  return ps;
}

namespace {

// llama.cpp's --fit of `ps` on its GPUs (or, without one, the host's RAM); `given` says which
// settings the user stated.
LlamaCppFitResult fit_for_device(const model::ModelSpec& m, const EngineSettings& given,
                                 LlamaCppSettings ps, const Budget& budget, uint32_t build,
                                 std::string_view gpu_name) {
  LlamaCppFitInput fi;
  fi.gpu_name = std::string(gpu_name);
  fi.free_bytes = ps.has_gpu ? budget.gpu_bytes : budget.host_bytes;
  fi.target_bytes = given.fit_target_bytes;
  fi.n_ctx_min = given.fit_ctx;
  fi.build = build;
  fi.ngl_given = given.n_gpu_layers.has_value();
  fi.split_given = !given.tensor_split.empty();
  fi.overrides_given = !given.tensor_overrides.empty();
  // -c not given where the release starts with the model's context (or -c 0 before b7826, which
  // turned an explicit 0 into "the whole context, not lowered").
  const bool model_ctx = (!given.max_model_len && ps.release->server_default_ctx == 0) ||
                         given.ctx_of_model || (given.max_model_len && *given.max_model_len == 0);
  const bool explicit_zero = given.max_model_len && *given.max_model_len == 0;
  if (model_ctx) {
    ps.n_ctx = static_cast<uint32_t>(std::min<uint64_t>(
        m.max_position_embeddings > 0 ? m.max_position_embeddings : 4096, UINT32_MAX));
  }
  fi.ctx_auto = model_ctx && !(explicit_zero && (build == 0 || build >= 7826));
  const auto measure = [&m, &budget](const LlamaCppSettings& t) -> std::optional<LlamaCppDryRun> {
    const auto q = plan_llamacpp(m, t);
    if (!q) return std::nullopt;
    LlamaCppDryRun run;
    if (budget.gpu_bytes == 0) {
      // The host's buffers as llama.cpp's memory breakdown sums them: the model's, the KV
      // cache's and the compute buffers (not the output buffer or the runtime).
      run.used_bytes.push_back(q->model_mapped_bytes + q->model_host_bytes + q->model_repack_bytes +
                               q->kv.host_bytes + q->compute.host_bytes);
      return run;
    }
    for (const auto& d : q->gpus) {
      run.used_bytes.push_back(gpu_need(d));
      run.model_bytes += d.model_bytes;
    }
    return run;
  };
  return fit_llamacpp(m, ps, fi, measure);
}

}  // namespace

Expected<Estimate> estimate_llamacpp(const EstimateInput& in) {
  // -q Q4_K_M (any llama-quantize mix): the model as that GGUF would be.
  std::optional<model::ModelSpec> as_mix;
  EngineSettings given = in.settings;
  if (model::find_gguf_mix(trim(in.settings.quantization))) {
    auto priced = llamacpp_model(in);
    if (!priced) return std::unexpected(priced.error());
    as_mix = std::move(*priced);
    given.quantization.clear();
  }
  const auto& m = as_mix ? *as_mix : in.model;
  Estimate est;
  est.settings = given;
  auto& s = est.settings;
  if (s.tensor_parallel_size * s.pipeline_parallel_size * s.data_parallel_size != 1) {
    return fail(ErrorKind::usage,
                "llama.cpp splits layers over GPUs with -ngl and -ts (--tensor-split 1,1), not "
                "-tp/-pp/-dp");
  }
  // -c 0, or no -c where the server starts with the model's own context; else llama-server's
  // 4096.
  if (s.ctx_of_model || (s.max_model_len && *s.max_model_len == 0)) {
    s.max_model_len = m.max_position_embeddings > 0 ? m.max_position_embeddings : 4096;
  }
  if (!s.max_model_len) s.max_model_len = 4096;  // llama-server --ctx-size
  auto quant = resolve_quantization(m, s);
  if (!quant) return std::unexpected(quant.error());
  est.model_id = m.id;
  est.model_source = m.source;
  est.gpu = in.gpu;
  est.compute_dtype = resolve_compute_dtype(m, s);
  est.quantization = quant_name(*quant);
  if (as_mix) {
    est.quantization = as_mix->quant.format + " (what-if: llama-quantize's mix, not a checkpoint)";
    est.settings.quantization = in.settings.quantization;
  }
  WeightOptions w;
  w.compute_dtype = est.compute_dtype;
  w.quant = *quant;
  est.weights = weights_per_rank(m, w);
  if (!m.warnings.empty()) est.confidence = "medium";

  auto settings = llamacpp_settings(s);
  if (!settings) return std::unexpected(settings.error());
  Budget budget;
  budget.host_bytes = s.host_memory_bytes.value_or(sys::read_mem_info().total_bytes.value_or(0));
  budget.gpu_bytes = settings->has_gpu ? in.gpu.memory_bytes : 0;
  const auto release = parse_llamacpp_release(s.engine_version);
  const uint32_t build = release ? release->build : 0;
  std::optional<LlamaCppFitResult> fitted;
  if (s.fit.value_or(false)) {
    if (settings->release->first_build < 7407) {
      est.warnings.push_back(
          fmt::format("--fit: llama.cpp {} has none (from b7407): planned with the flags as given",
                      release ? release->name : "this release"));
    } else if (!settings->has_gpu && build != 0 && build < 8840) {
      est.warnings.push_back(fmt::format(
          "--fit: llama.cpp {} fits only GPU settings (a CPU-only context from b8840): planned "
          "with the flags as given",
          release->name));
    } else {
      if (settings->has_gpu && settings->tensor_split.size() > 1 && build != 0 && build < 7650) {
        est.warnings.push_back(fmt::format(
            "--fit over several GPUs: planned as llama.cpp b7650 and later fit them; {} placed "
            "the last GPU's layers otherwise (#18494)",
            release->name));
      }
      fitted = fit_for_device(m, in.settings, *settings, budget, build, in.gpu.name);
      *settings = fitted->settings;
      s.max_model_len = settings->n_ctx;
      if (settings->has_gpu && settings->n_gpu_layers >= 0)
        s.n_gpu_layers = static_cast<uint32_t>(settings->n_gpu_layers);
      s.tensor_overrides = settings->tensor_overrides;
      if (fitted->split_set) s.tensor_split = settings->tensor_split;
    }
  }
  const LlamaCppSettings& ps = *settings;
  auto plan = plan_llamacpp(m, ps);
  if (!plan) return std::unexpected(plan.error());
  const LlamaCppPlan& p = *plan;
  if (release) {
    if (!release->warning.empty()) est.warnings.push_back(release->warning);
    if (s.flash_attn_auto && !ps.release->flash_attn_auto)
      est.warnings.push_back(flash_attn_default_note(m, ps, p, release->name));
  }

  LlamaCppSummary sum;
  sum.has_gpu = ps.has_gpu;
  if (ps.has_gpu) {
    for (size_t i = 0; i < p.gpus.size(); ++i) {
      const LlamaCppDevice& d = p.gpus[i];
      sum.gpus.push_back({fmt::format("CUDA{}", i), d.layers, d.output, d.model_bytes, d.kv_bytes,
                          d.compute_bytes, gpu_need(d), budget.gpu_bytes});
    }
  }
  sum.gpu_layers = p.gpu_layers;
  sum.output_on_gpu = p.output_on_gpu;
  sum.kv_cells = p.kv_cells;
  sum.kv_cells_swa = p.kv_cells_swa;
  sum.host_weights_bytes = p.model_host_resident_bytes;
  sum.host_kv_bytes = p.kv.host_bytes;
  sum.host_compute_reserved_bytes = p.compute.host_bytes;
  sum.host_compute_bytes = p.compute_host_resident_bytes;
  sum.host_output_bytes = p.output_bytes;
  sum.host_runtime_bytes = p.runtime_bytes;
  sum.host_total_bytes = p.host_total_bytes;
  sum.host_budget_bytes = budget.host_bytes;
  sum.host_headroom_bytes =
      static_cast<int64_t>(budget.host_bytes) - static_cast<int64_t>(p.host_total_bytes);
  if (ps.has_gpu) {
    for (int32_t ngl = static_cast<int32_t>(m.n_layer) + 1; ngl >= 0; --ngl) {
      LlamaCppSettings t = ps;
      t.n_gpu_layers = ngl;
      if (auto q = plan_llamacpp(m, t); q && fits(*q, budget)) {
        sum.max_gpu_layers = static_cast<uint32_t>(ngl);
        break;
      }
    }
  }
  // A MoE model on a GPU: the fewest layers whose experts must stay on the host (--n-cpu-moe,
  // after the overrides given) for the rest to fit; the GPU's need falls as N grows.
  if (ps.has_gpu && m.moe.n_expert > 0) {
    const auto fits_with = [&](uint32_t n) {
      LlamaCppSettings t = ps;
      const auto extra = n_cpu_moe_overrides(n);
      if (!extra) return false;
      t.tensor_overrides.insert(t.tensor_overrides.end(), extra->begin(), extra->end());
      const auto q = plan_llamacpp(m, t);
      return q && fits(*q, budget);
    };
    if (fits_with(m.n_layer)) {
      uint32_t lo_n = 0, hi_n = m.n_layer;
      while (lo_n < hi_n) {
        const uint32_t mid = (lo_n + hi_n) / 2;
        if (fits_with(mid)) {
          hi_n = mid;
        } else {
          lo_n = mid + 1;
        }
      }
      sum.min_n_cpu_moe = lo_n;
    }
  }
  // The largest -c that fits, in steps of 256 cells (binary search; memory grows with -c).
  uint64_t lo = 0;
  uint64_t hi = std::max<uint64_t>(m.max_position_embeddings, 4096) * ps.n_seq_max / k_ctx_step;
  while (lo < hi) {
    const uint64_t mid = (lo + hi + 1) / 2;
    LlamaCppSettings t = ps;
    t.n_ctx = static_cast<uint32_t>(std::min<uint64_t>(mid * k_ctx_step, UINT32_MAX));
    if (auto q = plan_llamacpp(m, t); q && fits(*q, budget)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  sum.max_ctx_size = lo * k_ctx_step;
  sum.override_lines = p.override_lines;
  if (fitted) {
    sum.fit_args = fitted->args;
    sum.fit_success = fitted->success;
    sum.fit_lines = fitted->lines;
    if (!fitted->success) {
      est.warnings.push_back(
          "--fit: even the fitted settings leave less than --fit-target free; llama.cpp loads "
          "them anyway (" +
          fitted->args + ")");
    }
  }

  MemoryBreakdown& mb = est.per_gpu;
  if (ps.has_gpu) {
    // Per GPU: the one that needs the most.
    const LlamaCppDevice& d = *busiest_gpu(p);
    est.gpus_total = static_cast<uint32_t>(p.gpus.size());
    mb.weights_bytes = d.model_bytes;
    mb.kv_cache_bytes = d.kv_bytes;
    mb.activation_bytes = d.compute_bytes;
    mb.cuda_context_bytes = gpu_need(d) - d.total_bytes();
  } else {
    // A CPU deployment: the host is the device, its RAM the budget.
    est.gpu.memory_bytes = budget.host_bytes;
    mb.weights_bytes = p.model_host_resident_bytes;
    mb.kv_cache_bytes = p.kv.host_bytes;
    // Activations are the compute buffer llama.cpp reserves, as bench and profile count them;
    // the pages of it a running server never touches are not resident, so not in the total.
    mb.activation_bytes = p.compute.host_bytes;
    mb.untouched_bytes =
        p.compute.host_bytes - std::min(p.compute.host_bytes, p.compute_host_resident_bytes);
    mb.non_torch_bytes = p.output_bytes + p.runtime_bytes;
  }
  mb.total_bytes = mb.weights_bytes + mb.kv_cache_bytes + mb.activation_bytes + mb.non_torch_bytes +
                   mb.cuda_context_bytes - mb.untouched_bytes;
  const uint64_t kv_device = ps.has_gpu ? p.kv.gpu_bytes : p.kv.host_bytes;
  est.kv_bytes_per_token = p.kv_bytes_per_cell;
  auto& rep = est.engine_report;
  rep.available_kv_cache_bytes = p.kv.host_bytes + p.kv.gpu_bytes;
  rep.kv_cache_tokens = p.kv_cells;
  rep.max_model_len = p.n_ctx_seq;
  rep.max_num_seqs = ps.n_seq_max;
  rep.max_concurrency = ps.n_seq_max;
  rep.max_num_batched_tokens = p.n_ubatch;
  rep.block_size = 1;
  rep.log_lines = llamacpp_log_lines(p, ps, m.n_layer);
  // A slot holds at most n_ctx_seq tokens; all slots share the cells of the cache.
  const Workload wl = default_workload(in.workload, p.n_ctx_seq);
  const uint64_t per_cell = p.kv_cells == 0 ? 0 : kv_device / p.kv_cells;
  fill_rows(est, wl, kv_device, true, [per_cell](uint64_t ctx) { return ctx * per_cell; });
  est.max_parallel_requests = ps.n_seq_max;
  for (auto& r : est.rows) {
    if (r.context_tokens > p.n_ctx_seq) {
      r.verdict = Verdict::rejected;
      r.note = fmt::format("longer than a slot's context ({} tokens): llama-server refuses it",
                           p.n_ctx_seq);
    } else if (r.concurrency > ps.n_seq_max) {
      r.note = fmt::format("only {} slots (-np): requests beyond them wait", ps.n_seq_max);
      r.verdict = std::max(r.verdict, Verdict::queues);
    }
  }
  finish_verdict(est, true);
  if (sum.host_headroom_bytes < 0) {
    est.verdict = Verdict::does_not_start;
    est.start_failure = "loading weights (host RAM)";
    mark_rows_not_started(est);
    est.warnings.push_back(fmt::format("host RAM: needs {:.2f} GiB of {:.2f} GiB",
                                       mib(p.host_total_bytes) / 1024,
                                       mib(budget.host_bytes) / 1024));
  }
  if (p.gpu_layers < m.n_layer && ps.has_gpu) {
    est.notes.push_back(fmt::format("{} layers stay in host memory", m.n_layer - p.gpu_layers));
  }
  est.notes.push_back(
      p.compute_stage == "graph"
          ? "llama.cpp: weights and KV as libllama sizes its buffers (exact from a GGUF); the "
            "compute buffer is ggml's allocator replayed over llama.cpp's own graph"
          : "llama.cpp: weights and KV as libllama sizes its buffers (exact from a GGUF); compute "
            "buffer from the largest stage of the worst-case graph (logits, attention, MLP)");
  if (!ps.tensor_overrides.empty()) {
    est.notes.push_back(fmt::format(
        "{} tensor override{} (-ot, --cpu-moe, --n-cpu-moe) put {:.2f} GiB of weights in host "
        "memory, placed by name as llama.cpp does",
        ps.tensor_overrides.size(), ps.tensor_overrides.size() == 1 ? "" : "s",
        mib(p.overridden_host_bytes) / 1024));
  }
  if (p.op_offload_copy_bytes > 0) {
    est.notes.push_back(fmt::format(
        "op offload: for prompt batches of 32 tokens or more the first GPU multiplies by the "
        "weights kept in host memory, one at a time, each copied into its compute buffer: "
        "{:.2f} MiB at its peak (--no-op-offload keeps those products on the CPU)",
        mib(p.op_offload_copy_bytes)));
  }
  if (p.gpus.size() > 1) {
    est.notes.push_back(fmt::format(
        "layers split over {} GPUs by llama.cpp's rule (-ts); each GPU's compute buffer is "
        "estimated from its own stages, and pipeline parallelism's extra input copies are not "
        "modelled",
        p.gpus.size()));
  }
  est.llamacpp = sum;
  return est;
}

}  // namespace kvprof::engines
