// Validation, dtype and quantization resolution shared by the engine profiles.
#include "kvprof/estimate/engine_common.hpp"

#include "kvprof/model/gguf_mix.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kvprof/model/what_if_quant.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::estimate {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::fits:
      return "fits";
    case Verdict::tight:
      return "tight";
    case Verdict::queues:
      return "queues";
    case Verdict::rejected:
      return "rejected";
    case Verdict::does_not_start:
      return "does_not_start";
    case Verdict::oom:
      return "oom";
  }
  return "?";
}

std::string verdict_text(Verdict v) {
  std::string s(verdict_name(v));
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

std::string_view risk_level(double used_fraction) {
  if (used_fraction < 0.7) return "low";
  if (used_fraction < 0.9) return "medium";
  if (used_fraction <= 1.0) return "high";
  return "critical";
}

Expected<void> validate_parallelism(const model::ModelSpec& m, const EngineSettings& s) {
  if (s.tensor_parallel_size == 0 || s.pipeline_parallel_size == 0 || s.data_parallel_size == 0) {
    return fail(ErrorKind::usage, "parallel sizes must be at least 1");
  }
  if (s.tensor_parallel_size > 1024 || s.pipeline_parallel_size > 1024 ||
      s.data_parallel_size > 4096) {
    return fail(ErrorKind::usage, "parallel size too large");
  }
  const uint32_t tp = s.tensor_parallel_size;
  if (m.n_head % tp != 0) {
    return fail(ErrorKind::usage,
                fmt::format("--tensor-parallel-size {} does not divide the model's {} attention "
                            "heads (num_attention_heads)",
                            tp, m.n_head));
  }
  const uint32_t kv = m.mla.enabled() ? tp : std::max<uint32_t>(m.n_head_kv, 1);
  if (kv % tp != 0 && tp % kv != 0) {
    return fail(ErrorKind::usage,
                fmt::format("--tensor-parallel-size {} and the model's {} KV heads "
                            "(num_key_value_heads): neither divides the other",
                            tp, kv));
  }
  if (s.pipeline_parallel_size > m.n_layer) {
    return fail(ErrorKind::usage,
                fmt::format("--pipeline-parallel-size {} exceeds the model's {} layers",
                            s.pipeline_parallel_size, m.n_layer));
  }
  if (s.gpu_memory_utilization && !valid_memory_fraction(*s.gpu_memory_utilization)) {
    return fail(ErrorKind::usage, fmt::format("--gpu-memory-utilization {} must be in (0, 1]",
                                              *s.gpu_memory_utilization));
  }
  if (s.max_model_len && *s.max_model_len == 0) {
    return fail(ErrorKind::usage, "--max-model-len must be at least 1");
  }
  if (s.block_size && (*s.block_size == 0 || *s.block_size > 4096)) {
    return fail(ErrorKind::usage, "--block-size must be in 1..4096");
  }
  return {};
}

bool valid_memory_fraction(double fraction) {
  return fraction > 0.0 && fraction <= 1.0;
}

model::DType resolve_compute_dtype(const model::ModelSpec& m, const EngineSettings& s) {
  if (s.dtype) return *s.dtype;
  if (m.dtype == model::DType::f32 || m.dtype == model::DType::f64) return model::DType::bf16;
  if (m.dtype == model::DType::f16 || m.dtype == model::DType::bf16) return m.dtype;
  return model::DType::bf16;
}

std::string quant_name(const model::Quantization& q) {
  using model::QuantMethod;
  // Priced as a checkpoint of that method would be (estimate -q awq on an unquantized model).
  if (!q.from_checkpoint && q.method != QuantMethod::fp8 && q.method != QuantMethod::bitsandbytes &&
      q.method != QuantMethod::none) {
    model::Quantization as_checkpoint = q;
    as_checkpoint.from_checkpoint = true;
    return quant_name(as_checkpoint) + " (what-if)";
  }
  switch (q.method) {
    case QuantMethod::none:
      return "none";
    case QuantMethod::fp8:
      return q.from_checkpoint ? "fp8" : "fp8 (runtime)";
    case QuantMethod::awq:
      return "awq";
    case QuantMethod::gptq:
      return "gptq";
    case QuantMethod::compressed_tensors:
      return q.format.empty() ? "compressed-tensors" : "compressed-tensors " + q.format;
    case QuantMethod::bitsandbytes:
      return "bitsandbytes";
    case QuantMethod::mxfp4:
      return "mxfp4";
    case QuantMethod::nvfp4:
      return "nvfp4";
    case QuantMethod::gguf:
      return "gguf " + q.format;
  }
  return "?";
}

Expected<model::Quantization> resolve_quantization(const model::ModelSpec& m,
                                                   const EngineSettings& s) {
  using model::QuantMethod;
  const std::string flag = to_lower(trim(s.quantization));
  if (flag.empty() || flag == "none" || flag == "auto") return m.quant;
  const bool checkpoint_quantized = m.quant.method != QuantMethod::none;
  auto matches = [&](QuantMethod method) { return m.quant.method == method; };
  if (flag == "fp8" || flag == "fbgemm_fp8" || flag == "ptpc_fp8") {
    if (checkpoint_quantized) {
      if (matches(QuantMethod::fp8) || matches(QuantMethod::compressed_tensors)) return m.quant;
      return fail(ErrorKind::usage, fmt::format("--quantization {} but the checkpoint is {}", flag,
                                                quant_name(m.quant)));
    }
    model::Quantization q;
    q.method = QuantMethod::fp8;
    q.weight_bits = 8;
    q.weight_float = true;
    q.from_checkpoint = false;
    q.ignored_modules = {"lm_head"};
    return q;
  }
  // An unquantized model priced as a quantized checkpoint of it would be.
  if (!checkpoint_quantized && flag != "bitsandbytes") {
    if (auto q = model::what_if_quantization(flag)) {
      if (*q && (*q)->method == QuantMethod::mxfp4 && !m.is_moe()) {
        return fail(ErrorKind::usage,
                    "--quantization mxfp4: engines quantize only MoE experts with MXFP4, and "
                    "this model has none");
      }
      return *q;
    }
  }
  if (flag == "bitsandbytes" && !checkpoint_quantized) {
    model::Quantization q;
    q.method = QuantMethod::bitsandbytes;
    q.weight_bits = 4;
    q.from_checkpoint = false;
    return q;
  }
  struct Alias {
    std::string_view name;
    QuantMethod method;
  };
  static constexpr Alias k_aliases[] = {
      {"awq", QuantMethod::awq},
      {"awq_marlin", QuantMethod::awq},
      {"gptq", QuantMethod::gptq},
      {"gptq_marlin", QuantMethod::gptq},
      {"gptq_marlin_24", QuantMethod::gptq},
      {"compressed-tensors", QuantMethod::compressed_tensors},
      {"compressed_tensors", QuantMethod::compressed_tensors},
      {"bitsandbytes", QuantMethod::bitsandbytes},
      {"mxfp4", QuantMethod::mxfp4},
      {"modelopt", QuantMethod::fp8},
      {"modelopt_fp4", QuantMethod::nvfp4},
      {"gguf", QuantMethod::gguf},
  };
  for (const auto& a : k_aliases) {
    if (flag != a.name) continue;
    // vLLM serves llm-compressor w4a16 checkpoints through the gptq_marlin kernels.
    if (matches(a.method) ||
        (a.method == QuantMethod::gptq && matches(QuantMethod::compressed_tensors)) ||
        (a.method == QuantMethod::fp8 && matches(QuantMethod::compressed_tensors))) {
      return m.quant;
    }
    return fail(ErrorKind::usage,
                fmt::format("--quantization {} but the checkpoint is {}", flag,
                            checkpoint_quantized ? quant_name(m.quant) : "not quantized"));
  }
  if (model::find_gguf_mix(flag)) {
    return fail(ErrorKind::usage,
                fmt::format("--quantization {} is a llama.cpp GGUF mix: price it with --engine "
                            "llamacpp",
                            s.quantization));
  }
  return fail(ErrorKind::usage,
              fmt::format("unknown --quantization '{}' (a checkpoint's: fp8, awq, gptq, "
                          "gptq_marlin, compressed-tensors, bitsandbytes, mxfp4, modelopt, gguf; "
                          "what-if on an unquantized model: {}; with --engine llamacpp: {})",
                          s.quantization, model::k_what_if_methods, model::gguf_mix_names()));
}

double kv_used_fraction(uint64_t needed_bytes, uint64_t capacity_bytes) {
  return capacity_bytes == 0
             ? 2.0
             : static_cast<double>(needed_bytes) / static_cast<double>(capacity_bytes);
}

Verdict row_verdict(const RowDemand& d) {
  if (d.max_model_len > 0 && d.context_tokens > d.max_model_len) return Verdict::rejected;
  if (d.needed_bytes > d.capacity_bytes) {
    if (!d.paged) return Verdict::oom;
    // One request larger than the whole cache can never be scheduled.
    return d.per_request_bytes > d.capacity_bytes ? Verdict::rejected : Verdict::queues;
  }
  return kv_used_fraction(d.needed_bytes, d.capacity_bytes) > 0.9 ? Verdict::tight : Verdict::fits;
}

Verdict deployment_verdict(bool engine_starts, int64_t headroom_bytes, uint64_t gpu_memory_bytes,
                           Verdict worst_row) {
  if (!engine_starts || headroom_bytes < 0) return Verdict::does_not_start;
  const bool low_headroom =
      static_cast<double>(headroom_bytes) < 0.02 * static_cast<double>(gpu_memory_bytes);
  return std::max(worst_row, low_headroom ? Verdict::tight : Verdict::fits);
}

std::string start_failure_stage(const MemoryBreakdown& mb, uint64_t gpu_memory_bytes,
                                bool engine_starts) {
  const uint64_t loaded = mb.cuda_context_bytes + mb.weights_bytes + mb.draft_bytes;
  const uint64_t profiled = loaded + mb.activation_bytes + mb.non_torch_bytes;
  if (loaded > gpu_memory_bytes) return "loading weights";
  if (profiled > gpu_memory_bytes) return "the profile run";
  if (!engine_starts || mb.cuda_graph_bytes == 0) return "KV cache allocation";
  return "CUDA graph capture";
}

void finish_verdict(Estimate& est, bool engine_starts, bool paged) {
  est.headroom_bytes =
      static_cast<int64_t>(est.gpu.memory_bytes) - static_cast<int64_t>(est.per_gpu.total_bytes);
  Verdict worst_row = Verdict::fits;
  for (const auto& r : est.rows)
    worst_row = std::max(worst_row, r.verdict);
  est.verdict =
      deployment_verdict(engine_starts, est.headroom_bytes, est.gpu.memory_bytes, worst_row);
  est.start_failure = est.verdict == Verdict::does_not_start
                          ? start_failure_stage(est.per_gpu, est.gpu.memory_bytes, engine_starts)
                          : "";
  // Without a paged cache the engine starts once the weights are in; a workload that does not
  // fit then runs out of memory while serving.
  if (!paged && est.verdict == Verdict::does_not_start && est.start_failure != "loading weights") {
    est.verdict = Verdict::oom;
    est.start_failure.clear();
  }
  mark_rows_not_started(est);
}

void mark_rows_not_started(Estimate& est) {
  if (est.verdict != Verdict::does_not_start) return;
  for (auto& r : est.rows) {
    r.verdict = Verdict::does_not_start;
    r.note = "nothing runs: the engine does not start (" + est.start_failure + ")";
  }
}

void fill_rows(Estimate& est, const Workload& w, uint64_t capacity_bytes, bool paged,
               std::function<uint64_t(uint64_t)> per_request_bytes) {
  est.kv_capacity_bytes = capacity_bytes;
  est.request_kv_bytes = per_request_bytes;
  const uint64_t fixed = est.per_gpu.total_bytes - est.per_gpu.kv_cache_bytes;
  const uint64_t max_model_len = est.settings.max_model_len.value_or(0);
  for (const uint64_t ctx : w.context_tokens) {
    for (const uint32_t conc : w.concurrency) {
      WorkloadRow row;
      row.context_tokens = ctx;
      row.concurrency = conc;
      row.kv_needed_bytes = per_request_bytes(ctx) * conc;
      row.kv_capacity_bytes = capacity_bytes;
      row.margin_bytes =
          static_cast<int64_t>(capacity_bytes) - static_cast<int64_t>(row.kv_needed_bytes);
      row.total_bytes = paged ? est.per_gpu.total_bytes : fixed + row.kv_needed_bytes;
      const double used = kv_used_fraction(row.kv_needed_bytes, capacity_bytes);
      row.risk = std::string(risk_level(used));
      const uint64_t one = per_request_bytes(ctx);
      row.verdict =
          row_verdict({ctx, max_model_len, row.kv_needed_bytes, one, capacity_bytes, paged});
      switch (row.verdict) {
        case Verdict::rejected:
          row.note = ctx > max_model_len && max_model_len > 0
                         ? fmt::format("longer than max_model_len {}: the server rejects it",
                                       max_model_len)
                         : "one request needs more than the whole KV cache";
          break;
        case Verdict::queues:
          row.note = fmt::format(
              "queues above {} concurrent: the engine waits or preempts, it does not crash",
              one == 0 ? 0 : capacity_bytes / one);
          break;
        case Verdict::oom:
          row.note = "out of memory: this engine has no paged cache to queue with";
          break;
        case Verdict::tight:
          row.note = "over 90% of the KV cache";
          break;
        default:
          break;
      }
      est.rows.push_back(std::move(row));
    }
  }
}

Workload default_workload(const Workload& w, uint64_t max_model_len) {
  Workload out = w;
  if (out.context_tokens.empty()) out.context_tokens = {max_model_len};
  if (out.concurrency.empty()) out.concurrency = {1};
  return out;
}

}  // namespace kvprof::estimate
