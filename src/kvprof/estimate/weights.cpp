// Per-rank weight bytes from the tensor inventory (config) or the checkpoint's tensors.
#include "kvprof/estimate/weights.hpp"

#include <algorithm>
#include <charconv>
#include <set>
#include <string_view>
#include <vector>

#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::estimate {
namespace {

using model::DType;
using model::QuantMethod;

uint64_t dtype_bytes_x8(DType t) {
  return model::dtype_bits(t);
}  // bits = bytes * 8

// Decoder layer of a tensor name like "model.layers.12.mlp..." or "blk.12.ffn_up"; -1 if none.
int32_t layer_of(std::string_view name) {
  for (const std::string_view key : {"layers.", "blk.", "h.", "block."}) {
    const size_t pos = name.find(key);
    if (pos == std::string_view::npos) continue;
    if (pos > 0 && name[pos - 1] != '.') continue;
    const char* begin = name.data() + pos + key.size();
    int32_t layer = -1;
    auto [ptr, ec] = std::from_chars(begin, name.data() + name.size(), layer);
    if (ec == std::errc{} && ptr != begin) return layer;
  }
  return -1;
}

// The module of a synthetic or checkpoint name that an ignore-list entry names.
bool entry_matches(std::string_view entry, const LogicalTensor& t) {
  const std::string e = to_lower(entry);
  if (e.find("lm_head") != std::string::npos) return t.role == TensorRole::lm_head;
  if (e.find("embed") != std::string::npos) return t.role == TensorRole::embedding;
  if (e.find("vision") != std::string::npos || e.find("visual") != std::string::npos ||
      e.find("multi_modal") != std::string::npos || e.find("mm_projector") != std::string::npos) {
    return t.role == TensorRole::vision;
  }
  const int32_t layer = layer_of(e);
  if (layer >= 0 && layer != t.layer) return false;
  // Norms, biases and routing corrections are never quantized, so naming one (GLM-5's FP8 lists
  // every "...q_a_layernorm" and "...gate.e_score_correction_bias") leaves no linear layer out.
  if (e.find("norm") != std::string::npos || e.ends_with("bias") ||
      e.find("e_score_correction") != std::string::npos) {
    return false;
  }
  if (e.find("indexer") != std::string::npos) {  // DSA: wq_b, wk, weights_proj ("indexers_proj")
    if (t.name.find("indexer") == std::string::npos) return false;
    for (const std::string_view mod : {"wq_b", "wk"}) {
      if (e.ends_with(mod)) return t.name.ends_with(mod);
    }
    if (e.ends_with("proj")) return t.name.ends_with("weights_proj");
    return true;
  }
  if (e.find("shared_expert") != std::string::npos) return t.role == TensorRole::shared_expert;
  if (e.find("router") != std::string::npos || e.ends_with("mlp.gate") || e.ends_with("gate$") ||
      e.ends_with(".gate")) {
    return t.role == TensorRole::router;
  }
  if (e.find("self_attn") != std::string::npos || e.find(".attn") != std::string::npos ||
      e.find("attention") != std::string::npos) {
    if (layer < 0 && e.find("proj") == std::string::npos) return t.role == TensorRole::attention;
  }
  if (layer >= 0) {
    // A specific module of one layer, e.g. "model.layers.0.mlp.down_proj".
    for (const std::string_view mod : {"q_proj", "k_proj", "v_proj", "o_proj", "down_proj",
                                       "kv_a_proj", "kv_b_proj", "q_a_proj", "q_b_proj"}) {
      if (e.find(mod) != std::string::npos) return t.name.find(mod) != std::string::npos;
    }
    if (e.find("gate_proj") != std::string::npos || e.find("up_proj") != std::string::npos) {
      return t.name.find("gate_up_proj") != std::string::npos;
    }
    if (e.find("self_attn") != std::string::npos) return t.role == TensorRole::attention;
    if (e.find("mlp") != std::string::npos) {
      return t.role == TensorRole::mlp || t.role == TensorRole::expert ||
             t.role == TensorRole::shared_expert;
    }
  }
  return false;
}

uint64_t unquantized_bytes(uint64_t elements, DType dtype) {
  return ceil_div(elements * dtype_bytes_x8(dtype), 8);
}

}  // namespace

uint32_t role_tp(TensorRole role, const WeightOptions& o) {
  const auto width = [&o](uint32_t given) {
    return std::max<uint32_t>(given == 0 ? o.tp : given, 1);
  };
  switch (role) {
    case TensorRole::expert:
      return width(o.expert_tp);
    case TensorRole::attention:
      return width(o.attention_tp);
    case TensorRole::mlp:
    case TensorRole::shared_expert:
      return width(o.dense_tp);
    case TensorRole::embedding:
    case TensorRole::position:
      return width(o.embedding_tp);
    case TensorRole::lm_head:
      return width(o.lm_head_tp);
    default:
      return width(0);
  }
}

namespace {

// Rank-local rows/cols (and experts) of a tensor under tensor and expert parallelism.
struct LocalShape {
  uint64_t rows = 0;
  uint64_t cols = 0;
  uint64_t count = 1;
};

LocalShape local_shape(const LogicalTensor& t, const model::ModelSpec& m, const WeightOptions& o) {
  LocalShape s{t.rows, t.cols, t.count};
  // Expert parallelism: whole experts per rank, then the width inside each.
  if (t.role == TensorRole::expert)
    s.count = ceil_div(s.count, std::max<uint32_t>(o.expert_parallel, 1));
  const uint64_t tp = role_tp(t.role, o);
  switch (t.shard) {
    case Shard::replicated:
      break;
    case Shard::column:
      s.rows = ceil_div(s.rows, tp);
      break;
    case Shard::row:
      s.cols = ceil_div(s.cols, tp);
      break;
    case Shard::vocab: {
      const uint64_t pad = std::max<uint32_t>(o.vocab_padding, 1);
      s.rows = ceil_div(ceil_div(s.rows, pad) * pad, tp);
      break;
    }
    case Shard::kv_heads: {
      const uint64_t heads = std::max<uint32_t>(
          t.layer >= 0 ? m.layer_n_head_kv(static_cast<size_t>(t.layer)) : m.n_head_kv, 1);
      const uint64_t per_head = s.rows / heads;
      s.rows = per_head * std::max<uint64_t>(1, heads / tp);
      break;
    }
  }
  return s;
}

bool on_this_rank(int32_t layer, TensorRole role, std::pair<uint32_t, uint32_t> range,
                  const WeightOptions& o) {
  if (layer >= 0) {
    return static_cast<uint32_t>(layer) >= range.first &&
           static_cast<uint32_t>(layer) < range.second;
  }
  const bool first = o.pp_rank == 0;
  const bool last = o.pp_rank + 1 == std::max<uint32_t>(o.pp, 1);
  switch (role) {
    case TensorRole::embedding:
    case TensorRole::position:
    case TensorRole::vision:
      return first;
    case TensorRole::lm_head:
    case TensorRole::norm:
      return last;
    default:
      return true;
  }
}

void account(WeightBreakdown& w, TensorRole role, uint64_t bytes) {
  w.total_bytes += bytes;
  switch (role) {
    case TensorRole::embedding:
    case TensorRole::position:
      w.embedding_bytes += bytes;
      break;
    case TensorRole::lm_head:
      w.lm_head_bytes += bytes;
      break;
    case TensorRole::attention:
      w.attention_bytes += bytes;
      break;
    case TensorRole::mlp:
    case TensorRole::shared_expert:
      w.mlp_bytes += bytes;
      break;
    case TensorRole::expert:
      w.expert_bytes += bytes;
      break;
    default:
      w.other_bytes += bytes;
      break;
  }
}

// Role and split of a checkpoint tensor from its name (HF and GGUF naming).
LogicalTensor classify(const model::TensorInfo& info) {
  LogicalTensor t;
  t.name = info.name;
  t.layer = layer_of(info.name);
  const std::string n = to_lower(info.name);
  auto has = [&](std::string_view s) { return n.find(s) != std::string::npos; };
  if (has("vision") || has("visual") || has("multi_modal_projector") || has("mm_projector") ||
      has("image_newline") || has("patch_embed")) {
    t.role = TensorRole::vision;
    t.shard = Shard::column;
  } else if (has("embed_tokens") || has("wte") || has("token_embd") || has("word_embeddings")) {
    t.role = TensorRole::embedding;
    t.shard = Shard::vocab;
  } else if (has("lm_head") || n == "output.weight" || has("embed_out")) {
    t.role = TensorRole::lm_head;
    t.shard = Shard::vocab;
  } else if (has("norm") || has("ln_") || has(".ln")) {
    t.role = TensorRole::norm;
  } else if (has("experts.") || has("_exps")) {
    t.role = TensorRole::expert;
    t.shard = has("down") || has("w2") ? Shard::row : Shard::column;
  } else if (has("shared_expert")) {
    t.role = TensorRole::shared_expert;
    t.shard = has("down") ? Shard::row : Shard::column;
  } else if (has("mlp.gate.") || has("router") || has("gate_inp")) {
    t.role = TensorRole::router;
  } else if (has("mixer.") || has("ssm") || has("linear_attn")) {
    t.role = TensorRole::ssm;
    t.shard = has("out_proj") ? Shard::row : Shard::column;
  } else if (has("o_proj") || has("down_proj") || has("dense") || has("fc2") ||
             has("attn_output") || has("ffn_down") || has("out_proj") || has(".w2")) {
    t.role = has("o_proj") || has("attn_output") || has("dense.") ? TensorRole::attention
                                                                  : TensorRole::mlp;
    t.shard = Shard::row;
  } else if (has("k_proj") || has("v_proj") || has("attn_k") || has("attn_v")) {
    t.role = TensorRole::attention;
    t.shard = Shard::kv_heads;
  } else if (has("proj") || has("attn") || has("fc1") || has("ffn") || has("mlp") ||
             has("query_key_value")) {
    t.role = has("attn") || has("q_proj") || has("query") ? TensorRole::attention : TensorRole::mlp;
    t.shard = Shard::column;
  }
  return t;
}

WeightBreakdown weights_from_tensors(const model::ModelSpec& m, const WeightOptions& o) {
  WeightBreakdown w;
  w.exact = true;
  const auto range = pp_layer_range(m.n_layer, o.pp, o.pp_rank);
  w.layers_on_rank = range.second - range.first;
  for (const auto& info : m.tensors) {
    LogicalTensor t = classify(info);
    if (t.layer >= static_cast<int32_t>(m.n_layer)) continue;  // MTP layers: not loaded
    uint64_t elements = 1;
    for (uint64_t d : info.shape)
      elements *= d;
    w.params_total += elements;
    if (!on_this_rank(t.layer, t.role, range, o)) continue;
    uint64_t bytes = info.bytes;
    const uint64_t tp = role_tp(t.role, o);
    switch (t.shard) {
      case Shard::replicated:
        break;
      case Shard::kv_heads:
        bytes =
            bytes * std::max<uint64_t>(1, m.n_head_kv / tp) / std::max<uint32_t>(m.n_head_kv, 1);
        if (m.n_head_kv == 0) bytes = ceil_div(info.bytes, tp);
        break;
      default:
        bytes = ceil_div(bytes, t.role == TensorRole::expert
                                    ? tp * std::max<uint32_t>(o.expert_parallel, 1)
                                    : tp);
        break;
    }
    w.params_on_rank += ceil_div(elements * bytes, std::max<uint64_t>(info.bytes, 1));
    account(w, t.role, bytes);
  }
  return w;
}

uint64_t rope_cache_bytes(const model::ModelSpec& m, DType compute_dtype) {
  const uint64_t rotary = m.mla.enabled() ? m.mla.qk_rope_head_dim : m.rotary_dim;
  if (rotary == 0 || m.max_position_embeddings == 0) return 0;
  // One cache per distinct rope configuration: Gemma 3 keeps a local and a global one.
  const uint64_t n_caches = m.model_type.starts_with("gemma3") ? 2 : 1;
  return n_caches * m.max_position_embeddings * rotary * model::dtype_bits(compute_dtype) / 8;
}

}  // namespace

std::pair<uint32_t, uint32_t> pp_layer_range(uint32_t n_layer, uint32_t pp, uint32_t rank) {
  pp = std::max<uint32_t>(pp, 1);
  std::vector<uint32_t> sizes(pp, n_layer / pp);
  const uint32_t remaining = n_layer % pp;
  for (uint32_t i = 2; i < remaining + 2; ++i)
    sizes[pp - i] += 1;
  uint32_t begin = 0;
  for (uint32_t r = 0; r < rank && r < pp; ++r)
    begin += sizes[r];
  return {begin, begin + (rank < pp ? sizes[rank] : 0)};
}

uint64_t quantized_linear_bytes(uint64_t rows, uint64_t cols, uint64_t count,
                                const model::Quantization& q, DType compute_dtype) {
  const uint64_t elements = rows * cols * count;
  switch (q.method) {
    case QuantMethod::none:
      return unquantized_bytes(elements, compute_dtype);
    case QuantMethod::gguf:
      return ceil_div(elements * std::max<uint32_t>(q.weight_bits, 1), 8);
    case QuantMethod::mxfp4:
      return ceil_div(elements, 2) + ceil_div(elements, 32);
    case QuantMethod::nvfp4:
      return ceil_div(elements, 2) + ceil_div(elements, 16) + 8 * count;
    case QuantMethod::bitsandbytes:
      if (q.weight_bits <= 4) return ceil_div(elements, 2) + ceil_div(elements, 64) + 4 * count;
      return elements + rows * count * 4;
    default:
      break;
  }
  const uint32_t bits = q.weight_bits == 0 ? 16 : q.weight_bits;
  if (bits >= 16) return unquantized_bytes(elements, compute_dtype);
  uint64_t bytes = ceil_div(elements * bits, 8);
  if (q.block_rows > 0 && q.block_cols > 0) {
    bytes += ceil_div(rows, q.block_rows) * ceil_div(cols, q.block_cols) * count * 4;
  } else if (q.group_size > 0) {
    const uint64_t groups = ceil_div(cols, static_cast<uint64_t>(q.group_size)) * rows * count;
    bytes += groups * 2;  // fp16/bf16 scales
    if (q.zero_point) bytes += ceil_div(groups * bits, 8);
    if (q.act_order) bytes += cols * count * 4;  // g_idx
  } else {
    bytes += rows * count * 4;  // per-channel scales
  }
  return bytes;
}

bool is_left_unquantized(const LogicalTensor& t, const model::Quantization& q) {
  if (!t.linear || q.method == QuantMethod::none) return true;
  for (const auto& entry : q.ignored_modules) {
    if (entry_matches(entry, t)) return true;
  }
  // gpt-oss style MXFP4 checkpoints quantize only the routed experts.
  if (q.method == QuantMethod::mxfp4 && t.role != TensorRole::expert) return true;
  return false;
}

WeightBreakdown weights_per_rank(const model::ModelSpec& m, const WeightOptions& o) {
  WeightBreakdown w;
  const bool use_file =
      !m.tensors.empty() && (o.quant.method == QuantMethod::none || o.quant.from_checkpoint);
  if (use_file) {
    w = weights_from_tensors(m, o);
  } else {
    const auto tensors = decoder_tensors(m);
    const auto range = pp_layer_range(m.n_layer, o.pp, o.pp_rank);
    w.layers_on_rank = range.second - range.first;
    w.params_total = count_params(tensors);
    for (const auto& t : tensors) {
      if (!on_this_rank(t.layer, t.role, range, o)) continue;
      const LocalShape s = local_shape(t, m, o);
      const uint64_t bytes =
          is_left_unquantized(t, o.quant)
              ? unquantized_bytes(s.rows * s.cols * s.count, o.compute_dtype)
              : quantized_linear_bytes(s.rows, s.cols, s.count, o.quant, o.compute_dtype);
      w.params_on_rank += s.rows * s.cols * s.count;
      account(w, t.role, bytes);
    }
  }
  if (o.rope_cache) {
    w.buffer_bytes = rope_cache_bytes(m, o.compute_dtype);
    w.total_bytes += w.buffer_bytes;
  }
  return w;
}

uint64_t mxfp4_padding_bytes(const model::ModelSpec& m, const WeightOptions& o, Mxfp4Padding p) {
  if (o.quant.method != QuantMethod::mxfp4 || !m.is_moe()) return 0;
  const uint64_t experts = ceil_div(m.moe.n_expert, std::max<uint32_t>(o.expert_parallel, 1));
  const uint64_t inter = ceil_div(m.moe.expert_intermediate_size, role_tp(TensorRole::expert, o));
  const uint64_t hidden = m.hidden_size;
  const auto round_up = [](uint64_t v, uint32_t align) {
    const uint64_t a = std::max<uint32_t>(align, 1);
    return ceil_div(v, a) * a;
  };
  // One expert: gate_up [2I x H] and down [H x I] as packed nibbles + a scale per 32, biases.
  const auto expert_bytes = [&](uint64_t i, uint64_t h) {
    const uint64_t elements = 3 * i * h;
    uint64_t bytes = elements / 2 + elements / 32;
    if (m.moe.expert_bias) bytes += (2 * i + h) * 2;
    return bytes;
  };
  const uint64_t per_expert =
      expert_bytes(round_up(inter, p.intermediate_align), round_up(hidden, p.hidden_align)) -
      expert_bytes(inter, hidden);
  if (per_expert == 0) return 0;
  // MoE layers this rank holds.
  const auto range = pp_layer_range(m.n_layer, o.pp, o.pp_rank);
  std::set<int32_t> layers;
  for (const auto& t : decoder_tensors(m)) {
    if (t.role == TensorRole::expert && on_this_rank(t.layer, t.role, range, o)) {
      layers.insert(t.layer);
    }
  }
  return per_expert * experts * layers.size();
}

}  // namespace kvprof::estimate
