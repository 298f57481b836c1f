// Builds the tensor inventory of a decoder from its dimensions: attention (MHA/GQA/MLA, gated
// output), dense MLPs, MoE experts with shared experts and routers, SSM mixers, norms, biases.
#include "kvprof/estimate/tensors.hpp"

#include <fmt/format.h>

namespace kvprof::estimate {
namespace {

using model::AttentionKind;
using model::ModelSpec;

void add(std::vector<LogicalTensor>& out, std::string name, TensorRole role, Shard shard,
         uint64_t rows, uint64_t cols, int32_t layer, bool linear, uint64_t count = 1) {
  out.push_back(LogicalTensor{std::move(name), role, shard, rows, cols, count, layer, linear});
}

void add_attention(std::vector<LogicalTensor>& out, const ModelSpec& m, int32_t layer) {
  const uint64_t h = m.hidden_size;
  const std::string p = fmt::format("layers.{}.self_attn.", layer);
  if (m.mla.enabled()) {
    const auto& a = m.mla;
    const uint64_t qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim;
    if (a.q_lora_rank > 0) {
      add(out, p + "q_a_proj", TensorRole::attention, Shard::replicated, a.q_lora_rank, h, layer,
          true);
      add(out, p + "q_a_layernorm", TensorRole::norm, Shard::replicated, a.q_lora_rank, 1, layer,
          false);
      add(out, p + "q_b_proj", TensorRole::attention, Shard::column, m.n_head * qk_head,
          a.q_lora_rank, layer, true);
    } else {
      add(out, p + "q_proj", TensorRole::attention, Shard::column, m.n_head * qk_head, h, layer,
          true);
    }
    add(out, p + "kv_a_proj_with_mqa", TensorRole::attention, Shard::replicated,
        a.kv_lora_rank + a.qk_rope_head_dim, h, layer, true);
    add(out, p + "kv_a_layernorm", TensorRole::norm, Shard::replicated, a.kv_lora_rank, 1, layer,
        false);
    add(out, p + "kv_b_proj", TensorRole::attention, Shard::column,
        static_cast<uint64_t>(m.n_head) * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank,
        layer, true);
    add(out, p + "o_proj", TensorRole::attention, Shard::row, h,
        static_cast<uint64_t>(m.n_head) * a.v_head_dim, layer, true);
    const auto l = static_cast<size_t>(layer);
    if (m.dsa.enabled() && l < m.layers.size() && m.layers[l].indexer) {
      // The indexer is replicated on every TP rank; vLLM keeps wk and weights_proj unquantized.
      const auto& d = m.dsa;
      add(out, p + "indexer.wq_b", TensorRole::attention, Shard::replicated,
          static_cast<uint64_t>(d.index_n_heads) * d.index_head_dim, a.q_lora_rank, layer, true);
      add(out, p + "indexer.wk", TensorRole::attention, Shard::replicated, d.index_head_dim, h,
          layer, false);
      add(out, p + "indexer.weights_proj", TensorRole::attention, Shard::replicated,
          d.index_n_heads, h, layer, false);
      add(out, p + "indexer.k_norm", TensorRole::norm, Shard::replicated, d.index_head_dim, 2,
          layer, false);
    }
    return;
  }
  const auto i = static_cast<size_t>(layer);
  const uint64_t head_dim = m.layer_head_dim(i);
  const uint64_t q_out = static_cast<uint64_t>(m.n_head) * head_dim * (m.attn_output_gate ? 2 : 1);
  const uint64_t kv_out = static_cast<uint64_t>(m.layer_n_head_kv(i)) * head_dim;
  add(out, p + "q_proj", TensorRole::attention, Shard::column, q_out, h, layer, true);
  add(out, p + "k_proj", TensorRole::attention, Shard::kv_heads, kv_out, h, layer, true);
  add(out, p + "v_proj", TensorRole::attention, Shard::kv_heads, kv_out, h, layer, true);
  add(out, p + "o_proj", TensorRole::attention, Shard::row, h,
      static_cast<uint64_t>(m.n_head) * head_dim, layer, true);
  if (m.attention_bias) {
    add(out, p + "q_proj.bias", TensorRole::attention, Shard::column, q_out, 1, layer, false);
    add(out, p + "k_proj.bias", TensorRole::attention, Shard::kv_heads, kv_out, 1, layer, false);
    add(out, p + "v_proj.bias", TensorRole::attention, Shard::kv_heads, kv_out, 1, layer, false);
  }
  if (m.o_bias) {
    add(out, p + "o_proj.bias", TensorRole::attention, Shard::replicated, h, 1, layer, false);
  }
  if (m.qk_norm) {
    add(out, p + "q_norm", TensorRole::norm, Shard::replicated, head_dim, 1, layer, false);
    add(out, p + "k_norm", TensorRole::norm, Shard::replicated, head_dim, 1, layer, false);
  }
}

void add_ssm(std::vector<LogicalTensor>& out, const ModelSpec& m, int32_t layer) {
  const auto& s = m.ssm;
  const uint64_t h = m.hidden_size;
  const std::string p = fmt::format("layers.{}.mixer.", layer);
  switch (s.kind) {
    case model::SsmSpec::Kind::mamba1: {
      const uint64_t dt_rank = s.dt_rank > 0 ? s.dt_rank : (h + 15) / 16;
      add(out, p + "in_proj", TensorRole::ssm, Shard::column, 2ULL * s.d_inner, h, layer, true);
      add(out, p + "conv1d", TensorRole::ssm, Shard::column, s.d_inner, s.d_conv + 1, layer, false);
      add(out, p + "x_proj", TensorRole::ssm, Shard::row, dt_rank + 2ULL * s.d_state, s.d_inner,
          layer, true);
      add(out, p + "dt_proj", TensorRole::ssm, Shard::column, s.d_inner, dt_rank + 1, layer, true);
      add(out, p + "A_log+D", TensorRole::ssm, Shard::column, s.d_inner, s.d_state + 1, layer,
          false);
      add(out, p + "out_proj", TensorRole::ssm, Shard::row, h, s.d_inner, layer, true);
      return;
    }
    case model::SsmSpec::Kind::mamba2: {
      const uint64_t groups_state = 2ULL * s.n_groups * s.d_state;
      const uint64_t conv_dim = s.d_inner + groups_state;
      add(out, p + "in_proj", TensorRole::ssm, Shard::column, s.d_inner + conv_dim + s.n_heads, h,
          layer, true);
      add(out, p + "conv1d", TensorRole::ssm, Shard::column, conv_dim, s.d_conv + 1, layer, false);
      add(out, p + "A_log+D+dt_bias", TensorRole::ssm, Shard::column, 3ULL * s.n_heads, 1, layer,
          false);
      add(out, p + "norm", TensorRole::ssm, Shard::column, s.d_inner, 1, layer, false);
      add(out, p + "out_proj", TensorRole::ssm, Shard::row, h, s.d_inner, layer, true);
      return;
    }
    case model::SsmSpec::Kind::gated_delta_net: {
      const uint64_t key_dim = static_cast<uint64_t>(s.n_k_heads) * s.k_head_dim;
      const uint64_t value_dim = static_cast<uint64_t>(s.n_heads) * s.head_dim;
      const uint64_t conv_dim = 2 * key_dim + value_dim;
      // in_proj_qkvz (q, k, v, z) and in_proj_ba (beta, alpha per value head).
      add(out, p + "in_proj_qkvz", TensorRole::ssm, Shard::column, 2 * key_dim + 2 * value_dim, h,
          layer, true);
      add(out, p + "in_proj_ba", TensorRole::ssm, Shard::column, 2ULL * s.n_heads, h, layer, true);
      add(out, p + "conv1d", TensorRole::ssm, Shard::column, conv_dim, s.d_conv, layer, false);
      add(out, p + "A_log+dt_bias", TensorRole::ssm, Shard::column, 2ULL * s.n_heads, 1, layer,
          false);
      add(out, p + "norm", TensorRole::ssm, Shard::replicated, s.head_dim, 1, layer, false);
      add(out, p + "out_proj", TensorRole::ssm, Shard::row, h, value_dim, layer, true);
      return;
    }
    case model::SsmSpec::Kind::none:
      return;
  }
}

void add_mlp(std::vector<LogicalTensor>& out, const ModelSpec& m, int32_t layer, bool moe) {
  const uint64_t h = m.hidden_size;
  const std::string p = fmt::format("layers.{}.mlp.", layer);
  if (moe && m.moe_with_dense_mlp) {
    add_mlp(out, m, layer, false);  // Gemma 4: the dense MLP, then the MoE block beside it
    add(out, p + "router.scales+ff_norms", TensorRole::norm, Shard::replicated,
        m.moe.n_expert + 4ULL * h, 1, layer, false);
  }
  if (!moe) {
    const uint64_t inter = m.layer_intermediate_size(static_cast<size_t>(layer));
    if (m.mlp_matrices >= 3) {
      add(out, p + "gate_up_proj", TensorRole::mlp, Shard::column, 2 * inter, h, layer, true);
    } else {
      add(out, p + "fc1", TensorRole::mlp, Shard::column, inter, h, layer, true);
    }
    add(out, p + "down_proj", TensorRole::mlp, Shard::row, h, inter, layer, true);
    if (m.mlp_bias) {
      add(out, p + "up.bias", TensorRole::mlp, Shard::column, inter * (m.mlp_matrices - 1), 1,
          layer, false);
      add(out, p + "down.bias", TensorRole::mlp, Shard::replicated, h, 1, layer, false);
    }
    return;
  }
  const auto& e = m.moe;
  const uint64_t inter = e.expert_intermediate_size;
  // Experts follow the model's MLP: gated (gate + up) or a plain up projection (Nemotron-H's
  // relu2 experts).
  const uint64_t up_rows = m.mlp_matrices >= 3 ? 2 : 1;
  add(out, p + "gate", TensorRole::router, Shard::replicated, e.n_expert, h, layer, false);
  if (e.router_bias) {
    add(out, p + "gate.bias", TensorRole::router, Shard::replicated, e.n_expert, 1, layer, false);
  }
  add(out, p + "experts.gate_up_proj", TensorRole::expert, Shard::column, up_rows * inter, h, layer,
      true, e.n_expert);
  add(out, p + "experts.down_proj", TensorRole::expert, Shard::row, h, inter, layer, true,
      e.n_expert);
  if (e.expert_bias) {
    add(out, p + "experts.bias", TensorRole::expert, Shard::column, up_rows * inter + h, 1, layer,
        false, e.n_expert);
  }
  if (e.n_shared_expert > 0) {
    const uint64_t per_expert =
        e.shared_expert_intermediate_size > 0 ? e.shared_expert_intermediate_size : inter;
    const uint64_t shared = static_cast<uint64_t>(e.n_shared_expert) * per_expert;
    add(out, p + "shared_experts.gate_up_proj", TensorRole::shared_expert, Shard::column,
        up_rows * shared, h, layer, true);
    add(out, p + "shared_experts.down_proj", TensorRole::shared_expert, Shard::row, h, shared,
        layer, true);
    if (e.shared_expert_gate) {
      add(out, p + "shared_expert_gate", TensorRole::router, Shard::replicated, 1, h, layer, false);
    }
  }
}

}  // namespace

std::vector<LogicalTensor> decoder_tensors(const ModelSpec& m) {
  std::vector<LogicalTensor> out;
  const uint64_t h = m.hidden_size;
  const uint64_t norm_width = m.layer_norm_bias ? 2 : 1;
  add(out, "embed_tokens", TensorRole::embedding, Shard::vocab, m.vocab_size, h, -1, false);
  if (m.learned_positions) {
    add(out, "embed_positions", TensorRole::position, Shard::replicated, m.max_position_embeddings,
        h, -1, false);
  }
  for (uint32_t i = 0; i < m.n_layer; ++i) {
    const auto layer = static_cast<int32_t>(i);
    const model::LayerSpec spec = i < m.layers.size() ? m.layers[i] : model::LayerSpec{};
    if (spec.attention == AttentionKind::mamba || spec.attention == AttentionKind::linear) {
      add_ssm(out, m, layer);
    } else {
      add_attention(out, m, layer);
    }
    const bool has_mlp = !(m.mlp_matrices == 0 || (spec.attention == AttentionKind::mamba &&
                                                   m.intermediate_size == 0 && !spec.moe));
    if (has_mlp) add_mlp(out, m, layer, spec.moe && m.is_moe());
    if (m.per_layer_input_size > 0) {
      const uint64_t ple = m.per_layer_input_size;
      const std::string p = fmt::format("layers.{}.per_layer_", i);
      add(out, p + "input_gate", TensorRole::mlp, Shard::replicated, ple, h, layer, true);
      add(out, p + "projection", TensorRole::mlp, Shard::replicated, h, ple, layer, true);
      add(out, p + "input_norm", TensorRole::norm, Shard::replicated, h, 1, layer, false);
    }
    const uint32_t norms = m.parallel_attn_mlp ? 1 : m.norms_per_layer;
    add(out, fmt::format("layers.{}.norms", i), TensorRole::norm, Shard::replicated,
        norms * norm_width * h, 1, layer, false);
  }
  if (m.per_layer_input_size > 0) {
    // Gemma 4's per-layer embeddings: n_layer slices of per_layer_input_size per token, and
    // the projection of the hidden state into them.
    const uint64_t width = static_cast<uint64_t>(m.n_layer) * m.per_layer_input_size;
    add(out, "embed_tokens_per_layer", TensorRole::embedding, Shard::vocab, m.per_layer_vocab_size,
        width, -1, false);
    add(out, "per_layer_model_projection", TensorRole::embedding, Shard::replicated, width, h, -1,
        false);
    add(out, "per_layer_projection_norm", TensorRole::norm, Shard::replicated,
        m.per_layer_input_size, 1, -1, false);
  }
  add(out, "norm", TensorRole::norm, Shard::replicated, norm_width * h, 1, -1, false);
  if (!m.tie_word_embeddings) {
    add(out, "lm_head", TensorRole::lm_head, Shard::vocab, m.vocab_size, h, -1, false);
  }
  if (m.extra_params > 0) {
    add(out, "vision_tower+projector", TensorRole::vision, Shard::column, m.extra_params, 1, -1,
        false);
  }
  return out;
}

uint64_t count_params(const std::vector<LogicalTensor>& tensors) {
  uint64_t n = 0;
  for (const auto& t : tensors)
    n += t.elements();
  return n;
}

}  // namespace kvprof::estimate
