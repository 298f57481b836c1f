// The set-up the SGLang, TensorRT-LLM and HF profiles share (see engine_setup.hpp).
#include "kvprof/estimate/engine_setup.hpp"

#include <algorithm>

#include "kvprof/estimate/activations.hpp"
#include "kvprof/estimate/weights.hpp"

namespace kvprof::estimate {

Expected<EngineSetup> prepare_engine(const EstimateInput& in, EngineSettings settings) {
  EngineSetup c;
  c.est.settings = std::move(settings);
  const auto& m = in.model;
  auto& s = c.est.settings;
  if (auto ok = validate_parallelism(m, s); !ok) return std::unexpected(ok.error());
  auto quant = resolve_quantization(m, s);
  if (!quant) return std::unexpected(quant.error());
  c.quant = *quant;
  c.est.model_id = m.id;
  c.est.model_source = m.source;
  c.est.gpu = in.gpu;
  c.est.compute_dtype = resolve_compute_dtype(m, s);
  c.est.quantization = quant_name(c.quant);
  // With DP attention the replicas share the tp GPUs; else each is tp x pp GPUs of its own.
  c.est.gpus_total = s.tensor_parallel_size * s.pipeline_parallel_size *
                     (s.enable_dp_attention ? 1 : s.data_parallel_size);
  if (!s.max_model_len) {
    s.max_model_len = m.max_position_embeddings > 0 ? m.max_position_embeddings : 4096;
  }
  WeightOptions w = parallel_split(s);
  w.compute_dtype = c.est.compute_dtype;
  w.quant = c.quant;
  c.est.weights = weights_per_rank(m, w);
  c.layout = kv_layout(m, role_tp(TensorRole::attention, w), w.pp, 0, s.kv_cache_dtype,
                       c.est.compute_dtype);
  c.est.kv_bytes_per_token = c.layout.kv_bytes_per_token;
  c.est.state_bytes_per_request = c.layout.state_bytes_per_request;
  c.est.kv_heads_replicated = c.layout.kv_heads_replicated;
  if (!m.warnings.empty()) c.est.confidence = "medium";
  return c;
}

WeightOptions parallel_split(const EngineSettings& s) {
  WeightOptions w;
  w.tp = s.tensor_parallel_size;
  w.pp = s.pipeline_parallel_size;
  if (s.enable_dp_attention) {
    // dp_attention.py compute_dp_attention_world_info: attn_tp_size = tp_size // dp_size; the
    // embedding is replicated (VocabParallelEmbedding(enable_tp=not dp attention)).
    w.attention_tp = std::max<uint32_t>(s.tensor_parallel_size / s.data_parallel_size, 1);
    w.embedding_tp = 1;
    if (s.enable_dp_lm_head) w.lm_head_tp = w.attention_tp;
  }
  if (s.moe_dense_tp_size) w.dense_tp = *s.moe_dense_tp_size;
  // --enable-ep-moe and the deepep backend: ep_size = tp_size (a replica's GPUs); else --ep-size,
  // and parallel_state.py's moe_tp_size = tp_size // moe_ep_size inside each expert.
  w.expert_parallel = s.enable_expert_parallel ? s.tensor_parallel_size
                                               : std::max<uint32_t>(s.expert_parallel_size, 1);
  w.expert_tp = std::max<uint32_t>(s.tensor_parallel_size / w.expert_parallel, 1);
  return w;
}

uint64_t sum_total(MemoryBreakdown& mb) {
  mb.total_bytes = mb.weights_bytes + mb.kv_cache_bytes + mb.activation_bytes +
                   mb.cuda_graph_bytes + mb.non_torch_bytes + mb.cuda_context_bytes +
                   mb.draft_bytes;
  return mb.total_bytes;
}

// Per-request cache with sliding layers bounded by their window.
std::function<uint64_t(uint64_t)> request_bytes(const KvLayout& layout) {
  return [layout](uint64_t ctx) { return request_cache_bytes(layout, ctx); };
}

// Into est.per_gpu: activations of a profile run of max_num_batched_tokens over `requests`,
// non-torch memory, and `graph_sets` sets of CUDA graphs (none with enforce_eager).
void add_runtime_bytes(Estimate& est, const model::ModelSpec& m, uint32_t requests,
                       uint32_t graph_sets) {
  const auto& s = est.settings;
  MemoryBreakdown& mb = est.per_gpu;
  ProfileRunShape shape;
  shape.tokens = *s.max_num_batched_tokens;
  shape.requests = requests;
  shape.tp = s.tensor_parallel_size;
  shape.compute_dtype = est.compute_dtype;
  mb.activation_bytes = profile_run_peak(m, shape).peak_bytes;
  mb.non_torch_bytes = non_torch_bytes(s.tensor_parallel_size, true);
  if (est.gpu.pcie()) mb.non_torch_bytes -= tp_comm_bytes(s.tensor_parallel_size);
  mb.cuda_graph_bytes = s.enforce_eager ? 0
                                        : cuda_graph_bytes(m, est.weights.layers_on_rank,
                                                           s.tensor_parallel_size, graph_sets);
}

// The engine-report fields taken from the settings in effect (all set by the caller); the block
// size is 1 token when unset.
void report_settings(EngineReport& rep, const EngineSettings& s) {
  rep.block_size = s.block_size.value_or(1);
  rep.max_model_len = *s.max_model_len;
  rep.max_num_seqs = *s.max_num_seqs;
  rep.max_num_batched_tokens = *s.max_num_batched_tokens;
  rep.memory_fraction = *s.gpu_memory_utilization;
}

// Sets the verdict, lowers "high" confidence to "medium" (the engine's rule is reproduced, not
// measured) and adds the note stating that rule.
void finish_engine(Estimate& est, bool engine_starts, std::string rule_note, bool paged) {
  finish_verdict(est, engine_starts, paged);
  // Weights that do not load: the engine prints none of its memory figures.
  if (est.start_failure == "loading weights") est.engine_report.log_lines.clear();
  if (est.confidence == "high") est.confidence = "medium";
  est.notes.push_back(std::move(rule_note));
}

}  // namespace kvprof::estimate
