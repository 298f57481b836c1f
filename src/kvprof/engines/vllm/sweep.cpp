// The vLLM sweep: plans built once per split, budgets and workload rows per configuration.
#include "kvprof/engines/vllm/sweep.hpp"

#include <algorithm>
#include <utility>

#include "kvprof/estimate/engine_common.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner below every engine

Expected<VllmSweep> VllmSweep::create(const EstimateInput& base, std::vector<gpu::GpuSpec> gpus,
                                      std::vector<SweepSplit> splits) {
  const model::ModelSpec& m = base.model;
  if (base.settings.engine != engines::Engine::vllm) {
    return fail(ErrorKind::usage, "the sweep models vLLM only");
  }
  if (m.n_layer == 0 || m.hidden_size == 0) {
    return fail(ErrorKind::input, "the model has no layers or hidden size");
  }
  for (const auto& g : gpus) {
    if (g.memory_bytes == 0) return fail(ErrorKind::usage, "the GPU has no memory");
  }
  auto quant = resolve_quantization(m, base.settings);
  if (!quant) return std::unexpected(quant.error());
  auto rules = parse_vllm_version(base.settings.engine_version);
  if (!rules) return std::unexpected(rules.error());

  VllmSweep sweep;
  sweep.m_rules = *rules;
  sweep.m_base = base.settings;
  sweep.m_activation = activation_model(m);
  sweep.m_default_max_model_len = vllm_default_max_model_len(m);
  const model::DType compute_dtype = resolve_compute_dtype(m, base.settings);
  const bool block_size_set = base.settings.block_size.has_value();
  // MXFP4 experts are padded per GPU family: one plan per split and padding that occurs.
  std::vector<Mxfp4Padding> paddings;
  for (const auto& g : gpus) {
    sweep.m_gpu_large.push_back(vllm_large_gpu(g, **rules));
    sweep.m_gpu_pcie.push_back(g.pcie());
    const Mxfp4Padding p =
        quant->method == model::QuantMethod::mxfp4 ? vllm_mxfp4_padding(g) : Mxfp4Padding{};
    auto it = std::find_if(paddings.begin(), paddings.end(), [&](const Mxfp4Padding& q) {
      return q.intermediate_align == p.intermediate_align && q.hidden_align == p.hidden_align;
    });
    if (it == paddings.end()) it = paddings.insert(paddings.end(), p);
    sweep.m_gpu_padding.push_back(static_cast<size_t>(it - paddings.begin()));
  }
  if (paddings.empty()) paddings.emplace_back();
  sweep.m_paddings = paddings.size();
  for (const auto& split : splits) {
    EngineSettings s = base.settings;
    s.tensor_parallel_size = split.tp;
    s.pipeline_parallel_size = split.pp;
    // Utilization and max_model_len are checked per configuration.
    s.gpu_memory_utilization.reset();
    s.max_model_len.reset();
    const bool valid = validate_parallelism(m, s).has_value();
    sweep.m_split_valid.push_back(valid);
    for (const Mxfp4Padding& padding : paddings) {
      sweep.m_plans.push_back(valid ? vllm_split_plan(m, base.draft ? &*base.draft : nullptr, s,
                                                      compute_dtype, *quant, block_size_set,
                                                      **rules, padding)
                                    : VllmSplitPlan{});
    }
  }
  sweep.m_gpus = std::move(gpus);
  sweep.m_splits = std::move(splits);
  return sweep;
}

VllmSweep::Budget VllmSweep::budget(const SweepPoint& p) const {
  Budget b;
  const EngineSettings& s = m_base;
  const bool large = m_gpu_large[p.gpu_index];
  VllmBatch batch;
  batch.gpu_memory_bytes = m_gpus[p.gpu_index].memory_bytes;
  batch.gpu_memory_utilization =
      p.gpu_memory_utilization > 0
          ? p.gpu_memory_utilization
          : s.gpu_memory_utilization.value_or(m_rules->default_gpu_memory_utilization);
  batch.max_model_len =
      p.max_model_len > 0 ? p.max_model_len : s.max_model_len.value_or(m_default_max_model_len);
  batch.max_num_batched_tokens =
      p.max_num_batched_tokens > 0
          ? p.max_num_batched_tokens
          : s.max_num_batched_tokens.value_or(
                vllm_default_max_num_batched_tokens(*m_rules, large, batch.max_model_len));
  batch.max_num_seqs = p.max_num_seqs > 0 ? p.max_num_seqs
                                          : s.max_num_seqs.value_or(vllm_default_max_num_seqs(
                                                *m_rules, large, batch.max_num_batched_tokens));
  batch.kv_cache_memory_bytes = s.kv_cache_memory_bytes;
  batch.num_gpu_blocks_override = s.num_gpu_blocks_override;
  batch.pcie = m_gpu_pcie[p.gpu_index];
  b.valid = m_split_valid[p.split_index] && valid_memory_fraction(batch.gpu_memory_utilization) &&
            batch.max_model_len > 0;
  if (!b.valid) return b;
  b.gpu_memory_bytes = batch.gpu_memory_bytes;
  b.max_model_len = batch.max_model_len;
  b.max_num_batched_tokens = batch.max_num_batched_tokens;
  b.plan = &m_plans[p.split_index * m_paddings + m_gpu_padding[p.gpu_index]];
  b.budget = vllm_budget(*b.plan, m_activation, batch);
  return b;
}

SweepResult VllmSweep::finish(const Budget& b, uint64_t context_tokens, uint32_t concurrency) {
  SweepResult r;
  if (!b.valid) return r;
  const VllmBudget& v = b.budget;
  r.valid = true;
  r.weights_bytes = b.plan->weights[0].total_bytes;
  r.kv_cache_bytes = v.kv_cache_bytes;
  r.num_gpu_blocks = v.num_blocks;
  r.kv_cache_tokens = v.kv.kv_cache_tokens;
  r.max_concurrency = v.kv.max_concurrency;
  r.total_bytes = v.total_bytes;
  r.headroom_bytes = static_cast<int64_t>(b.gpu_memory_bytes) - static_cast<int64_t>(r.total_bytes);
  const uint64_t ctx = context_tokens > 0 ? context_tokens : b.max_model_len;
  const uint64_t one =
      vllm_request_kv_bytes(b.plan->kv, v.bytes_per_block, ctx, b.max_num_batched_tokens);
  r.kv_needed_bytes = one * concurrency;
  r.row_verdict =
      row_verdict({ctx, b.max_model_len, r.kv_needed_bytes, one, v.kv_cache_bytes, true});
  r.verdict = deployment_verdict(v.starts, r.headroom_bytes, b.gpu_memory_bytes, r.row_verdict);
  if (r.verdict == Verdict::does_not_start) r.row_verdict = r.verdict;  // nothing runs
  return r;
}

SweepResult VllmSweep::evaluate(const SweepPoint& p) const {
  return finish(budget(p), p.context_tokens, p.concurrency);
}

uint64_t VllmSweep::grid_size(const SweepGrid& grid) const {
  return uint64_t{m_gpus.size()} * m_splits.size() * grid.gpu_memory_utilizations.size() *
         grid.max_model_lens.size() * grid.max_num_batched_tokens.size() *
         grid.max_num_seqs.size() * grid.context_tokens.size() * grid.concurrency.size();
}

}  // namespace kvprof::engines
