// The per-layer schedule of a config.json: attention kind and window of each layer (full,
// sliding, chunked, MLA, linear attention, Mamba), which layers are MoE, and the MLA, MoE and
// SSM dimensions. Rules follow the transformers modeling code of each model type.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kvprof/model/hf_detail.hpp"

namespace kvprof::model::hf {
namespace {

bool type_in(const ModelSpec& m, std::initializer_list<std::string_view> types) {
  return std::find(types.begin(), types.end(), m.model_type) != types.end();
}

uint32_t u32(uint64_t v) {
  return static_cast<uint32_t>(v);
}

Expected<uint32_t> required_dim(const json& t, std::initializer_list<std::string_view> keys,
                                std::string_view canonical) {
  HF_TRY(v, require_uint(t, keys, canonical, k_max_dim));
  return u32(v);
}

Expected<void> fill_mla(const json& t, ModelSpec& m) {
  HF_TRY(kv_rank, get_uint(t, {"kv_lora_rank"}, k_max_dim));
  if (!kv_rank || *kv_rank == 0) return {};
  HF_TRY(q_rank, get_uint(t, {"q_lora_rank"}, k_max_dim));  // null for V2-Lite
  HF_TRY(nope, required_dim(t, {"qk_nope_head_dim"}, "qk_nope_head_dim"));
  HF_TRY(rope, required_dim(t, {"qk_rope_head_dim"}, "qk_rope_head_dim"));
  HF_TRY(v_dim, required_dim(t, {"v_head_dim"}, "v_head_dim"));
  m.mla.kv_lora_rank = u32(*kv_rank);
  m.mla.q_lora_rank = u32(q_rank.value_or(0));
  m.mla.qk_nope_head_dim = nope;
  m.mla.qk_rope_head_dim = rope;
  m.mla.v_head_dim = v_dim;
  m.head_dim = nope + rope;
  m.rotary_dim = rope;
  return {};
}

// DeepSeek sparse attention: the indexer's dims and which layers build one. Every layer does
// unless indexer_types / index_topk_pattern ("F" full, "S" shared) or index_topk_freq say that
// only some do (IndexCache: full iff max(i - offset + 1, 0) % freq == 0, offset 2 by default).
Expected<void> fill_dsa(const json& t, ModelSpec& m) {
  HF_TRY(topk, get_uint(t, {"index_topk"}, k_max_positions));
  if (!topk || *topk == 0 || !m.mla.enabled()) return {};
  HF_TRY(heads, required_dim(t, {"index_n_heads"}, "index_n_heads"));
  HF_TRY(head_dim, required_dim(t, {"index_head_dim"}, "index_head_dim"));
  m.dsa.index_topk = u32(*topk);
  m.dsa.index_n_heads = heads;
  m.dsa.index_head_dim = head_dim;
  const uint32_t n = m.n_layer;
  if (const json* types = find_field(t, {"indexer_types"}); types != nullptr && !types->is_null()) {
    if (!types->is_array() || types->size() != n) {
      return field_error("indexer_types", fmt::format("must list one type per layer ({})", n));
    }
    for (uint32_t i = 0; i < n; ++i) {
      if (!(*types)[i].is_string()) return field_error("indexer_types", "must be strings");
      m.layers[i].indexer = (*types)[i].get<std::string>() == "full";
    }
    return {};
  }
  HF_TRY(pattern, get_string(t, "index_topk_pattern"));
  if (pattern && !pattern->empty()) {
    if (pattern->size() != n) {
      return field_error("index_topk_pattern", fmt::format("must have {} letters", n));
    }
    for (uint32_t i = 0; i < n; ++i)
      m.layers[i].indexer = (*pattern)[i] == 'F' || (*pattern)[i] == 'f';
    return {};
  }
  HF_TRY(freq, get_uint(t, {"index_topk_freq"}, k_max_layers));
  HF_TRY(offset, get_uint(t, {"index_skip_topk_offset"}, k_max_layers));
  const uint64_t f = std::max<uint64_t>(freq.value_or(1), 1);
  const uint64_t o = offset.value_or(2);
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t shifted = i + 1 >= o ? i + 1 - o : 0;
    m.layers[i].indexer = shifted % f == 0;
  }
  return {};
}

// Gemma 4: full layers with their own head dim (global_head_dim) and, where K doubles as V
// (attention_k_eq_v), their own KV heads; the last num_kv_shared_layers layers read an earlier
// layer's cache (double-wide MLPs there with use_double_wide_mlp); per-layer embeddings; the
// MoE block of 26B-A4B runs beside the dense MLP.
Expected<void> fill_gemma4(const json& t, ModelSpec& m) {
  if (!type_in(m, {"gemma4", "gemma4_text"})) return {};
  HF_TRY(global_dim, get_uint(t, {"global_head_dim"}, k_max_dim));
  HF_TRY(global_kv, get_uint(t, {"num_global_key_value_heads"}, k_max_dim));
  HF_TRY(k_eq_v, get_bool(t, "attention_k_eq_v"));
  HF_TRY(shared, get_uint(t, {"num_kv_shared_layers"}, k_max_layers));
  HF_TRY(double_wide, get_bool(t, "use_double_wide_mlp"));
  HF_TRY(ple, get_uint(t, {"hidden_size_per_layer_input"}, k_max_dim));
  HF_TRY(ple_vocab, get_uint(t, {"vocab_size_per_layer_input"}, k_max_vocab));
  const uint32_t n = m.n_layer;
  if (shared.value_or(0) >= n) {
    return field_error("num_kv_shared_layers", "leaves no layer with a cache of its own");
  }
  const uint32_t first_shared = n - u32(shared.value_or(0));
  for (uint32_t i = 0; i < n; ++i) {
    LayerSpec& l = m.layers[i];
    if (l.attention == AttentionKind::full) {
      l.head_dim = u32(global_dim.value_or(0));
      if (k_eq_v.value_or(false)) l.n_head_kv = u32(global_kv.value_or(0));
    }
    l.kv_shared = i >= first_shared;
    if (l.kv_shared && double_wide.value_or(false)) l.intermediate_size = 2 * m.intermediate_size;
  }
  m.moe_with_dense_mlp = m.is_moe();
  m.per_layer_input_size = u32(ple.value_or(0));
  m.per_layer_vocab_size = u32(ple_vocab.value_or(m.vocab_size));
  return {};
}

// Mamba-1 (Jamba), Mamba-2 (Granite 4, Nemotron-H, Bamba) or gated delta net (Qwen3-Next).
Expected<void> fill_ssm(const json& t, ModelSpec& m) {
  SsmSpec& s = m.ssm;
  if (find_field(t, {"linear_num_value_heads"}) != nullptr) {
    s.kind = SsmSpec::Kind::gated_delta_net;
    HF_TRY(v_heads, required_dim(t, {"linear_num_value_heads"}, "linear_num_value_heads"));
    HF_TRY(k_heads, required_dim(t, {"linear_num_key_heads"}, "linear_num_key_heads"));
    HF_TRY(v_dim, required_dim(t, {"linear_value_head_dim"}, "linear_value_head_dim"));
    HF_TRY(k_dim, required_dim(t, {"linear_key_head_dim"}, "linear_key_head_dim"));
    HF_TRY(conv, get_uint(t, {"linear_conv_kernel_dim"}, 1024));
    s.n_heads = v_heads;
    s.n_k_heads = k_heads;
    s.head_dim = v_dim;
    s.k_head_dim = k_dim;
    s.d_conv = u32(conv.value_or(4));
    s.d_inner = v_heads * v_dim;
    return {};
  }
  HF_TRY(n_heads, get_uint(t, {"mamba_n_heads", "mamba_num_heads"}, k_max_heads));
  HF_TRY(d_state, get_uint(t, {"mamba_d_state", "ssm_state_size", "state_size"}, k_max_dim));
  HF_TRY(d_conv, get_uint(t, {"mamba_d_conv", "conv_kernel"}, 1024));
  HF_TRY(expand, get_uint(t, {"mamba_expand", "expand"}, 64));
  if (n_heads && *n_heads > 0) {
    s.kind = SsmSpec::Kind::mamba2;
    s.n_heads = u32(*n_heads);
    const json* d_head = find_field(t, {"mamba_d_head", "mamba_head_dim"});
    const uint64_t d_inner_expand = expand.value_or(2) * m.hidden_size;
    if (d_head != nullptr && !d_head->is_string()) {
      HF_TRY(hd, get_uint(t, {"mamba_d_head", "mamba_head_dim"}, k_max_dim));
      s.head_dim = u32(hd.value_or(0));
    } else {  // "auto": d_inner / n_heads
      s.head_dim = u32(d_inner_expand / s.n_heads);
    }
    s.d_inner = s.n_heads * s.head_dim;
    HF_TRY(groups, get_uint(t, {"mamba_n_groups", "n_groups"}, k_max_heads));
    s.n_groups = u32(groups.value_or(1));
    s.d_state = u32(d_state.value_or(128));
    s.d_conv = u32(d_conv.value_or(4));
    return {};
  }
  if (d_state || find_field(t, {"mamba_dt_rank"}) != nullptr) {
    s.kind = SsmSpec::Kind::mamba1;
    s.d_state = u32(d_state.value_or(16));
    s.d_conv = u32(d_conv.value_or(4));
    s.d_inner = u32(expand.value_or(2) * m.hidden_size);
    const json* dt = find_field(t, {"mamba_dt_rank", "time_step_rank"});
    if (dt != nullptr && !dt->is_string()) {
      HF_TRY(rank, get_uint(t, {"mamba_dt_rank", "time_step_rank"}, k_max_dim));
      s.dt_rank = u32(rank.value_or(0));
    } else {  // "auto"
      s.dt_rank = (m.hidden_size + 15) / 16;
    }
  }
  return {};
}

Expected<AttentionKind> kind_of_layer_type(std::string_view name, AttentionKind full) {
  if (name == "full_attention" || name == "attention" || name == "global_attention") return full;
  if (name == "sliding_attention" || name == "local_attention") return AttentionKind::sliding;
  if (name == "chunked_attention") return AttentionKind::chunked;
  if (name == "linear_attention") return AttentionKind::linear;
  if (name == "mamba" || name == "mamba2") return AttentionKind::mamba;
  return field_error("layer_types", fmt::format("has an unknown layer type '{}'", name));
}

// Nemotron-H's hybrid_override_pattern: one character per block ('M' mamba, '*' attention,
// '-' MLP, 'E' MoE). A mixer block and the MLP block after it make one ModelSpec layer.
Expected<void> fill_from_pattern(std::string_view pattern, ModelSpec& m) {
  if (pattern.size() != m.n_layer) {
    return field_error(
        "hybrid_override_pattern",
        fmt::format("has {} blocks but num_hidden_layers is {}", pattern.size(), m.n_layer));
  }
  std::vector<LayerSpec> layers;
  size_t lone_mixers = 0;
  size_t lone_mlps = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == 'M' || c == '*') {
      LayerSpec l;
      l.attention = c == 'M' ? AttentionKind::mamba : AttentionKind::full;
      const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
      if (next == '-' || next == 'E') {
        l.moe = next == 'E';
        ++i;
      } else {
        ++lone_mixers;
      }
      layers.push_back(l);
    } else if (c == '-' || c == 'E') {
      ++lone_mlps;
    } else {
      return field_error("hybrid_override_pattern", fmt::format("has an unknown block '{}'", c));
    }
  }
  if (layers.empty()) return field_error("hybrid_override_pattern", "has no mixer block");
  // Every folded layer carries an MLP; scale the dense MLP width so that the total dense MLP
  // parameters still match the pattern's '-' blocks.
  const auto dense_blocks = static_cast<uint64_t>(std::count(pattern.begin(), pattern.end(), '-'));
  const auto dense_layers = static_cast<uint64_t>(
      std::count_if(layers.begin(), layers.end(), [](const LayerSpec& l) { return !l.moe; }));
  std::string scaled;
  if (dense_layers > 0 && dense_blocks != dense_layers) {
    const uint64_t before = m.intermediate_size;
    m.intermediate_size = u32((before * dense_blocks + dense_layers / 2) / dense_layers);
    scaled = fmt::format(
        "; intermediate_size scaled {} -> {} so the {} MLP blocks keep their "
        "parameters",
        before, m.intermediate_size, dense_blocks);
  }
  m.warnings.push_back(fmt::format(
      "hybrid_override_pattern: {} blocks folded into {} layers (mixer + following MLP), {} "
      "mixers without an MLP, {} MLPs without a mixer{}",
      pattern.size(), layers.size(), lone_mixers, lone_mlps, scaled));
  m.layers = std::move(layers);
  m.n_layer = u32(m.layers.size());
  return {};
}

Expected<void> fill_attention_kinds(const json& t, ModelSpec& m) {
  const AttentionKind full = m.mla.enabled() ? AttentionKind::mla : AttentionKind::full;
  HF_TRY(window_field, get_uint(t, {"sliding_window"}, k_max_positions));
  HF_TRY(chunk_field, get_uint(t, {"attention_chunk_size"}, k_max_positions));
  const uint32_t window = u32(std::min<uint64_t>(window_field.value_or(0), UINT32_MAX));
  const uint32_t chunk = u32(std::min<uint64_t>(chunk_field.value_or(0), UINT32_MAX));
  const uint32_t n = m.n_layer;
  m.layers.assign(n, LayerSpec{full, false, 0});

  if (const json* types = find_field(t, {"layer_types"}); types != nullptr) {
    if (!types->is_array()) return field_error("layer_types", "must be a list");
    if (types->size() != n) {
      return field_error("layer_types", fmt::format("has {} entries but num_hidden_layers is {}",
                                                    types->size(), n));
    }
    for (uint32_t i = 0; i < n; ++i) {
      if (!(*types)[i].is_string()) return field_error("layer_types", "must be a list of strings");
      HF_TRY(kind, kind_of_layer_type((*types)[i].get<std::string>(), full));
      m.layers[i].attention = kind;
    }
  } else if (const json* blocks = find_field(t, {"hybrid_override_pattern"}); blocks != nullptr) {
    if (!blocks->is_string()) return field_error("hybrid_override_pattern", "must be a string");
    if (auto r = fill_from_pattern(blocks->get<std::string>(), m); !r) return r;
  } else if (type_in(m, {"jamba"})) {
    HF_TRY(period, get_uint(t, {"attn_layer_period"}, k_max_layers));
    HF_TRY(offset, get_uint(t, {"attn_layer_offset"}, k_max_layers));
    const uint64_t p = period.value_or(8);
    if (p == 0) return field_error("attn_layer_period", "must be positive");
    for (uint32_t i = 0; i < n; ++i) {
      m.layers[i].attention = i % p == offset.value_or(4) ? full : AttentionKind::mamba;
    }
  } else if (find_field(t, {"attn_layer_indices"}) != nullptr) {  // Bamba
    HF_TRY(list, get_uint_list(t, "attn_layer_indices", k_max_layers));
    const std::vector<uint64_t> indices = list.value_or(std::vector<uint64_t>{});
    for (auto& l : m.layers)
      l.attention = AttentionKind::mamba;
    for (const auto i : indices) {
      if (i >= n) return field_error("attn_layer_indices", "names a layer past num_hidden_layers");
      m.layers[i].attention = full;
    }
  } else if (type_in(
                 m, {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"})) {
    HF_TRY(interval, get_uint(t, {"full_attention_interval"}, k_max_layers));
    const uint64_t k = interval.value_or(4);
    if (k == 0) return field_error("full_attention_interval", "must be positive");
    for (uint32_t i = 0; i < n; ++i) {
      m.layers[i].attention = (i + 1) % k == 0 ? full : AttentionKind::linear;
    }
  } else if (type_in(m, {"gemma2", "gpt_oss"})) {
    for (uint32_t i = 0; i < n; ++i) {
      if (i % 2 == 0) m.layers[i].attention = AttentionKind::sliding;
    }
  } else if (type_in(m, {"gemma3", "gemma3_text", "cohere2"}) ||
             find_field(t, {"sliding_window_pattern"}) != nullptr) {
    HF_TRY(pattern, get_uint(t, {"sliding_window_pattern"}, k_max_layers));
    const uint64_t p = pattern.value_or(m.model_type == "cohere2" ? 4 : 6);
    if (p == 0) return field_error("sliding_window_pattern", "must be positive");
    for (uint32_t i = 0; i < n; ++i) {
      if ((i + 1) % p != 0) m.layers[i].attention = AttentionKind::sliding;
    }
  } else if (type_in(m, {"llama4", "llama4_text"})) {
    HF_TRY(no_rope, get_uint_list(t, "no_rope_layers", 1));
    if (no_rope && no_rope->empty()) no_rope.reset();  // [] means "use the interval"
    HF_TRY(interval, get_uint(t, {"no_rope_layer_interval"}, k_max_layers));
    if (no_rope && no_rope->size() != n) {
      return field_error("no_rope_layers", fmt::format("has {} entries but num_hidden_layers is {}",
                                                       no_rope->size(), n));
    }
    const uint64_t k = interval.value_or(4);
    for (uint32_t i = 0; i < n; ++i) {
      // no_rope_layers[i] == 1: a RoPE layer, chunked; 0: a NoPE layer with full attention.
      const bool rope = no_rope ? (*no_rope)[i] != 0 : (k == 0 || (i + 1) % k != 0);
      if (rope && chunk > 0) m.layers[i].attention = AttentionKind::chunked;
    }
  } else if (window > 0) {
    // Qwen2-style configs only slide when use_sliding_window is true, and then only from
    // max_window_layers on; elsewhere (Mistral v0.1, Phi-3) a window applies to every layer.
    HF_TRY(use, get_bool(t, "use_sliding_window"));
    const bool qwen_style = t.contains("use_sliding_window") || t.contains("max_window_layers");
    if (!qwen_style || use.value_or(false)) {
      HF_TRY(first, get_uint(t, {"max_window_layers"}, k_max_layers));
      const uint64_t from = qwen_style ? first.value_or(0) : 0;
      for (uint32_t i = 0; i < n; ++i) {
        if (i >= from) m.layers[i].attention = AttentionKind::sliding;
      }
    }
  }

  for (auto& l : m.layers) {
    if (l.attention == AttentionKind::sliding) {
      if (window == 0)
        return field_error("sliding_window", "is missing for sliding-attention layers");
      l.window_tokens = window;
      // A window as long as the context is full attention.
      if (m.max_position_embeddings > 0 && window >= m.max_position_embeddings) {
        l.attention = full;
        l.window_tokens = 0;
      }
    } else if (l.attention == AttentionKind::chunked) {
      if (chunk == 0) return field_error("attention_chunk_size", "is missing for chunked layers");
      l.window_tokens = chunk;
    }
  }
  return {};
}

Expected<void> fill_moe(const json& t, ModelSpec& m) {
  HF_TRY(n_expert,
         get_uint(t, {"num_local_experts", "n_routed_experts", "num_experts", "moe_num_experts"},
                  k_max_experts));
  const bool granite_hybrid = type_in(m, {"granitemoehybrid", "granitemoeshared"});
  HF_TRY(shared_inter, get_uint(t, {"shared_intermediate_size"}, k_max_dim));
  if (granite_hybrid && shared_inter && n_expert.value_or(0) == 0) {
    m.intermediate_size = u32(*shared_inter);  // dense Granite 4: the "shared" MLP is the MLP
  }
  if (n_expert.value_or(0) <= 1) return {};
  MoeSpec& e = m.moe;
  e.n_expert = u32(*n_expert);
  HF_TRY(top_k, get_uint(t,
                         {"num_experts_per_tok", "experts_per_token", "num_experts_per_token",
                          "moe_topk", "moe_k", "top_k_experts"},
                         k_max_experts));
  if (!top_k || *top_k == 0)
    return field_error("num_experts_per_tok", "is missing for an MoE model");
  if (*top_k > e.n_expert)
    return field_error("num_experts_per_tok", "exceeds the number of experts");
  e.n_expert_used = u32(*top_k);
  HF_TRY(expert_size,
         get_uint(t, {"moe_intermediate_size", "expert_intermediate_size", "intermediate_size"},
                  k_max_dim));
  if (!expert_size || *expert_size == 0) {
    return field_error("moe_intermediate_size", "is missing for an MoE model");
  }
  e.expert_intermediate_size = u32(*expert_size);

  // Shared experts.
  HF_TRY(n_shared, get_uint(t, {"n_shared_experts", "num_shared_experts"}, k_max_experts));
  HF_TRY(qwen_shared,
         get_uint(t, {"shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"},
                  k_max_dim));
  if (n_shared.value_or(0) > 0) {
    e.n_shared_expert = u32(*n_shared);
    e.shared_expert_intermediate_size = e.expert_intermediate_size;
  } else if (qwen_shared.value_or(0) > 0) {
    e.n_shared_expert = 1;
    e.shared_expert_intermediate_size = u32(*qwen_shared);
    e.shared_expert_gate =
        type_in(m, {"qwen2_moe", "qwen3_next", "qwen3_5_moe", "qwen3_5_moe_text"});
  } else if (type_in(m, {"llama4", "llama4_text"})) {
    e.n_shared_expert = 1;
    e.shared_expert_intermediate_size = e.expert_intermediate_size;
  } else if (granite_hybrid && shared_inter.value_or(0) > 0) {
    e.n_shared_expert = 1;
    e.shared_expert_intermediate_size = u32(*shared_inter);
  }
  if (type_in(m, {"gpt_oss"})) {
    e.router_bias = true;
    e.expert_bias = true;
  }
  HF_TRY(topk_method, get_string(t, "topk_method"));
  if (topk_method.value_or("") == "noaux_tc") e.router_bias = true;  // e_score_correction_bias
  HF_TRY(routing_bias, get_bool(t, "use_routing_bias"));             // MiniMax-M2
  if (routing_bias.value_or(false)) e.router_bias = true;

  // Which layers route to experts.
  const uint32_t n = m.n_layer;
  HF_TRY(mlp_only, get_uint_list(t, "mlp_only_layers", k_max_layers));
  HF_TRY(sparse_step, get_uint(t, {"decoder_sparse_step"}, k_max_layers));
  HF_TRY(first_dense, get_uint(t, {"first_k_dense_replace"}, k_max_layers));
  HF_TRY(freq, get_uint(t, {"moe_layer_freq"}, k_max_layers));
  HF_TRY(interleave, get_uint(t, {"interleave_moe_layer_step"}, k_max_layers));
  HF_TRY(moe_layers, get_uint_list(t, "moe_layers", k_max_layers));
  HF_TRY(exp_period, get_uint(t, {"expert_layer_period"}, k_max_layers));
  HF_TRY(exp_offset, get_uint(t, {"expert_layer_offset"}, k_max_layers));
  for (const auto* name : {"decoder_sparse_step", "moe_layer_freq", "interleave_moe_layer_step",
                           "expert_layer_period"}) {
    const json* v = find_field(t, {name});
    if (v != nullptr && v->is_number() && v->get<double>() == 0)
      return field_error(name, "must be positive");
  }
  if (find_field(t, {"hybrid_override_pattern"}) != nullptr) return {};  // 'E' blocks set moe
  for (uint32_t i = 0; i < n; ++i) {
    bool moe = true;
    if (moe_layers) {
      moe = std::find(moe_layers->begin(), moe_layers->end(), i) != moe_layers->end();
    } else if (sparse_step || mlp_only) {
      moe = (i + 1) % sparse_step.value_or(1) == 0;
      if (mlp_only && std::find(mlp_only->begin(), mlp_only->end(), i) != mlp_only->end())
        moe = false;
    } else if (first_dense || freq) {
      moe = i >= first_dense.value_or(0) && i % freq.value_or(1) == 0;
    } else if (interleave) {
      moe = (i + 1) % *interleave == 0;
    } else if (exp_period) {
      moe = i % *exp_period == exp_offset.value_or(0);
    }
    m.layers[i].moe = moe;
  }
  return {};
}

}  // namespace

Expected<void> build_layers(const json& t, ModelSpec& m) {
  if (auto r = fill_mla(t, m); !r) return r;
  if (auto r = fill_ssm(t, m); !r) return r;
  if (auto r = fill_attention_kinds(t, m); !r) return r;
  if (auto r = fill_dsa(t, m); !r) return r;
  const bool needs_ssm =
      m.count_layers(AttentionKind::mamba) + m.count_layers(AttentionKind::linear) > 0;
  if (needs_ssm && m.ssm.kind == SsmSpec::Kind::none) {
    return field_error("layer_types", "names mamba/linear layers but the config has no state dims");
  }
  if (m.count_layers(AttentionKind::linear) > 0 && m.ssm.kind != SsmSpec::Kind::gated_delta_net) {
    return field_error("layer_types", "names linear_attention layers without linear_* dims");
  }
  if (auto r = fill_moe(t, m); !r) return r;
  if (auto r = fill_gemma4(t, m); !r) return r;
  HF_TRY(mtp, get_uint(t, {"num_nextn_predict_layers", "mtp_num_hidden_layers"}, 1024));
  m.n_mtp_layers = u32(mtp.value_or(0));
  return {};
}

}  // namespace kvprof::model::hf
