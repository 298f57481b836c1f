// llama.cpp's reserved graph, node by node (see graph.hpp). Each architecture family
// differs in a few switches (fused QKV, biases, q/k norms, Gemma's scaled embeddings and post
// norms, soft-capping, the MLP's shape); the rest is the graph every one shares: token
// embeddings, per layer a pre-norm, Q/K/V, the cache stores, attention (flash or not), the
// output projection and the residual, then the MLP; the last layer keeps only the output rows;
// then the final norm and the logits. Weights and cache tensors live in other buffers, so each
// is one external leaf here.
#include "kvprof/engines/llamacpp/graph.hpp"

#include <string>

namespace kvprof::engines {

namespace {

using model::AttentionKind;
using model::ModelSpec;

constexpr uint32_t k_f32 = 0;
constexpr uint32_t k_f16 = 1;
constexpr uint32_t k_i32 = 26;
constexpr uint32_t k_i64 = 27;
constexpr uint64_t k_cpu_alignment = 32;  // TENSOR_ALIGNMENT of ggml's CPU buffers

enum class Ffn : uint8_t { gated_swiglu, fused_swiglu, gated_geglu };

struct Arch {
  bool fused_qkv = false;           // phi3: one QKV projection, Q/K/V are views of it
  bool q_scale = false;             // the query is scaled after RoPE (Gemma, Phi-3)
  bool order_qkv = false;           // Q, K, V built in that order (else Q, V, K)
  bool embd_scale = false;          // Gemma: embeddings x sqrt(hidden)
  bool post_norms = false;          // Gemma 2/3: norms after attention and after the MLP
  bool attn_softcap = false;        // Gemma 2: tanh soft-capping of the scores (no FA)
  bool final_softcap = false;       // Gemma 2: tanh soft-capping of the logits
  bool residual_first_ffn = false;  // Phi-3 adds the residual as the first operand
  Ffn ffn = Ffn::gated_swiglu;
};

std::optional<Arch> arch_of(const ModelSpec& m) {
  const std::string& t = m.model_type;
  Arch a;
  if (t == "llama" || t == "mistral" || t == "qwen2" || t == "qwen3" || t == "qwen3_moe") {
    return a;
  }
  if (t == "phi3") {
    a.fused_qkv = true;
    a.q_scale = true;
    a.ffn = Ffn::fused_swiglu;
    a.residual_first_ffn = true;
    return a;
  }
  if (t == "gemma2" || t == "gemma3" || t == "gemma3_text") {
    a.q_scale = a.order_qkv = a.embd_scale = a.post_norms = true;
    a.attn_softcap = a.final_softcap = t == "gemma2";
    a.ffn = Ffn::gated_geglu;
    return a;
  }
  return std::nullopt;
}

bool quantized(uint32_t type) {
  return type != k_f32 && type != k_f16 && type != 30 /* bf16 */;
}

bool is_local(const model::LayerSpec& l) {
  return (l.attention == AttentionKind::sliding || l.attention == AttentionKind::chunked) &&
         l.window_tokens > 0;
}

class Builder {
 public:
  Builder(const ModelSpec& m, const LlamaGraphShape& s, Arch a) : m_m(m), m_s(s), m_a(a) {
    m_t = s.n_tokens;
    m_out = s.n_outputs == 0 ? m_t : std::min<int64_t>(s.n_outputs, m_t);
    m_streams = std::max<uint32_t>(1, s.n_stream);
    m_ts = m_t / m_streams;
    m_e = m.hidden_size;
    m_d = m.head_dim;
    m_h = m.n_head;
    m_hkv = m.n_head_kv;
    // llama_kv_cache rotates a quantized cache when the head size is a multiple of 64: K by the
    // largest power of two dividing it, V by 64.
    if (quantized(s.type_k) && m_d % 64 == 0) {
      m_rot_k = 64;
      while (m_d % (m_rot_k * 2) == 0)
        m_rot_k *= 2;
    }
    if (quantized(s.type_v) && m_d % 64 == 0) m_rot_v = 64;
    m_weights = m_g.external(GgmlGraph::contiguous(k_f16, {1, 1, 1, 1}));
    m_cache = m_g.external(GgmlGraph::contiguous(k_f16, {1, 1, 1, 1}));
  }

  GgmlGraph build() {
    m_tokens = m_g.input(k_i32, {m_t, 1, 1, 1}, "inp_tokens");
    int32_t inp = m_g.op(GgmlOp::get_rows, k_f32, {m_e, m_t, 1, 1}, {m_weights, m_tokens}, "embd");
    m_g.expand(inp);
    // The input for embeddings given directly sits in every graph, unused by a token batch.
    if (m_s.embd_input) m_g.expand(m_g.input(k_f32, {m_e, m_t, 1, 1}, "inp_embd"));
    if (m_a.embd_scale) inp = unary(GgmlOp::scale, inp, "inp_scaled");
    m_pos = m_g.input(k_i32, {m_t, 1, 1, 1}, "inp_pos");
    m_out_ids = m_g.input(k_i32, {m_out, 1, 1, 1}, "out_ids");
    for (uint32_t il = 0; il < m_m.n_layer; ++il) {
      inp = layer(il, inp);
    }
    int32_t cur = norm(inp);
    m_g.set_output(cur);
    const int64_t vocab = m_m.vocab_size;
    cur = m_g.op(GgmlOp::mul_mat, k_f32, {vocab, m_out, 1, 1}, {m_weights, cur}, "result_output");
    if (m_a.final_softcap) {
      cur = unary(GgmlOp::scale, cur);
      cur = unary(GgmlOp::unary, cur);
      cur = unary(GgmlOp::scale, cur);
    }
    m_g.set_output(cur);
    m_g.expand(cur);
    return std::move(m_g);
  }

 private:
  // An op on one tensor that keeps its shape (ggml runs these in place when it can).
  int32_t unary(GgmlOp op, int32_t x, std::string name = {}) {
    const GgmlTensor& t = m_g.at(x);
    return m_g.op(op, k_f32, t.ne, {x}, std::move(name));
  }
  // An op of `x` and a weight (norm scale, bias) that keeps x's shape.
  int32_t with_weight(GgmlOp op, int32_t x) {
    const GgmlTensor& t = m_g.at(x);
    return m_g.op(op, k_f32, t.ne, {x, m_weights});
  }
  int32_t norm(int32_t x) { return with_weight(GgmlOp::mul, unary(GgmlOp::rms_norm, x)); }
  int32_t matmul(int64_t rows, int32_t x, std::string name = {}) {
    const GgmlTensor& t = m_g.at(x);
    return m_g.op(GgmlOp::mul_mat, k_f32, {rows, t.ne[1], t.ne[2], t.ne[3]}, {m_weights, x},
                  std::move(name));
  }
  int32_t rows(int32_t x) {  // keeps the output rows of the last layer
    const GgmlTensor& t = m_g.at(x);
    return m_g.op(GgmlOp::get_rows, k_f32, {t.ne[0], m_out, 1, 1}, {x, m_out_ids});
  }

  // The cache inputs of one kind of layer (full or sliding-window), made when first used.
  struct KvInputs {
    int32_t k_idxs = -1;
    int32_t v_idxs = -1;
    int32_t mask = -1;
    int32_t k_rot = -1;  // the Hadamard rotations of a quantized cache (-1: none)
    int32_t v_rot = -1;
    int32_t mask_fa = -1;  // the mask flash attention reads (an f16 copy in early releases)
  };
  KvInputs& kv_inputs(bool local) {
    KvInputs& in = local ? m_swa : m_full;
    if (in.mask >= 0) return in;
    const int64_t n_kv = local ? m_s.n_kv_swa : m_s.n_kv;
    const int64_t v_rows = m_s.flash_attn ? m_t : m_t * m_hkv * m_d;
    // Early releases copied K and V into views of the cache: no index inputs.
    if (!m_s.legacy_graph) {
      in.k_idxs = m_g.input(k_i64, {m_t, 1, 1, 1}, "attn_inp_k_idxs");
      in.v_idxs = m_g.input(k_i64, {v_rows, 1, 1, 1}, "attn_inp_v_idxs");
    }
    const int64_t pad = std::max<int64_t>(1, m_s.mask_pad_tokens);
    const int64_t mask_rows = (m_ts + pad - 1) / pad * pad;
    const bool f16_mask = m_s.flash_attn && m_s.mask_f16;
    in.mask =
        m_g.input(f16_mask ? k_f16 : k_f32, {n_kv, mask_rows, 1, m_streams}, "attn_inp_kq_mask");
    in.mask_fa = in.mask;
    if (m_s.flash_attn && !m_s.mask_f16) {
      in.mask_fa = m_g.op(GgmlOp::cpy, k_f16, m_g.at(in.mask).ne, {in.mask}, "kq_mask (copy)");
    }
    if (m_rot_k > 0) in.k_rot = m_g.input(k_f32, {m_rot_k, m_rot_k, 1, 1}, "attn_inp_k_rot");
    if (m_rot_v > 0) in.v_rot = m_g.input(k_f32, {m_rot_v, m_rot_v, 1, 1}, "attn_inp_v_rot");
    return in;
  }

  // Q, K or V from its own projection: matmul, bias, 3-D reshape, q/k norm, RoPE, scale.
  int32_t projection(int32_t cur, int64_t heads, bool rope, bool scale) {
    int32_t x = matmul(heads * m_d, cur);
    if (m_m.attention_bias) x = with_weight(GgmlOp::add, x);
    x = m_g.reshape(x, {m_d, heads, m_t, 1});
    if (rope && m_m.qk_norm) x = norm(x);
    if (rope) x = m_g.op(GgmlOp::rope, k_f32, {m_d, heads, m_t, 1}, {x, m_pos});
    if (scale) x = unary(GgmlOp::scale, x);
    return x;
  }

  // A head group of the fused QKV projection: a strided view, roped into a new tensor.
  int32_t fused_part(int32_t qkv, int64_t heads, int64_t first_head, bool rope, bool scale) {
    const GgmlTensor& t = m_g.at(qkv);
    const uint64_t row = t.nb[1];
    int32_t x =
        m_g.view(qkv, {m_d, heads, m_t, 1}, {4, 4 * static_cast<uint64_t>(m_d), row, row * m_t},
                 4 * static_cast<uint64_t>(first_head * m_d));
    if (rope) x = m_g.op(GgmlOp::rope, k_f32, {m_d, heads, m_t, 1}, {x, m_pos});
    if (scale) x = unary(GgmlOp::scale, x);
    return x;
  }

  // x through a rotation of n x n (a matmul over rows of n), the shape kept.
  int32_t rotate(int32_t x, int32_t rot) {
    const std::array<int64_t, 4> ne = m_g.at(x).ne;
    const int64_t n = m_g.at(rot).ne[0];
    const int64_t rows = ne[0] * ne[1] * ne[2] * ne[3] / n;
    const int32_t r = m_g.reshape(x, {n, rows, 1, 1});
    const int32_t y = m_g.op(GgmlOp::mul_mat, k_f32, {n, rows, 1, 1}, {rot, r});
    return m_g.reshape(y, ne);
  }

  // Attention of layer il over the cache; returns the output projection's result.
  int32_t attention(uint32_t il, int32_t cur) {
    const bool local = il < m_m.layers.size() && is_local(m_m.layers[il]);
    int32_t q = -1;
    int32_t k = -1;
    int32_t v = -1;
    if (m_a.fused_qkv) {
      const int32_t qkv = matmul((m_h + 2 * m_hkv) * m_d, cur);
      q = fused_part(qkv, m_h, 0, true, m_a.q_scale);
      v = fused_part(qkv, m_hkv, m_h + m_hkv, false, false);
      k = fused_part(qkv, m_hkv, m_h, true, false);
    } else {
      q = projection(cur, m_h, true, m_a.q_scale);
      if (m_a.order_qkv) {
        k = projection(cur, m_hkv, true, false);
        v = projection(cur, m_hkv, false, false);
      } else {
        v = projection(cur, m_hkv, false, false);
        k = projection(cur, m_hkv, true, false);
      }
    }
    KvInputs& in = kv_inputs(local);
    // A quantized cache stores K and V rotated; the query turns with K, the output back with V.
    if (in.k_rot >= 0) {
      q = rotate(q, in.k_rot);
      k = rotate(k, in.k_rot);
    }
    if (in.v_rot >= 0) v = rotate(v, in.v_rot);
    for (const int32_t t : m_a.order_qkv ? std::array{q, k, v} : std::array{q, v, k})
      m_g.expand(t);
    const int64_t kv_width = m_hkv * m_d;
    if (m_s.legacy_graph) {
      // K and V copied into views of the cache (V transposed without flash attention).
      m_g.expand(m_g.view_op(GgmlOp::cpy, m_cache, {k, m_cache}));
      m_g.expand(m_g.view_op(GgmlOp::cpy, m_cache, {v, m_cache}));
    } else {
      store_kv(k, v, in, kv_width);
    }
    return attend(local, q, in);
  }

  // The cache stores of the set_rows graph: K as rows; V as rows with flash attention, else
  // transposed.
  void store_kv(int32_t k, int32_t v, const KvInputs& in, int64_t kv_width) {
    const int32_t k2 = m_g.reshape(k, {kv_width, m_t, 1, 1});
    m_g.expand(m_g.view_op(GgmlOp::set_rows, m_cache, {k2, in.k_idxs, m_cache}));
    int32_t v2 = -1;
    if (m_s.flash_attn) {
      const uint64_t row = m_g.at(v).nb[2];
      v2 = m_a.fused_qkv ? m_g.view(v, {kv_width, m_t, 1, 1}, {4, row, row * m_t, 0})
                         : m_g.reshape(v, {kv_width, m_t, 1, 1});
    } else if (m_a.fused_qkv) {
      v2 = m_g.op(GgmlOp::cont, k_f32, {m_d, m_hkv, m_t, 1}, {v}, "Vcur (cont)");
      v2 = m_g.reshape(v2, {kv_width * m_t, 1, 1, 1});
    } else {
      v2 = m_g.reshape(v, {kv_width, m_t, 1, 1});
      v2 = m_g.reshape(v2, {kv_width * m_t, 1, 1, 1});
    }
    m_g.expand(m_g.view_op(GgmlOp::set_rows, m_cache, {v2, in.v_idxs, m_cache}));
  }

  // Attention of q over the cache; returns the output projection's result.
  int32_t attend(bool local, int32_t q, const KvInputs& in) {
    const int64_t n_kv = local ? m_s.n_kv_swa : m_s.n_kv;
    const int32_t qs = m_g.reshape(q, {m_d, m_h, m_ts, m_streams});
    const int32_t qp = m_g.permute(qs, {0, 2, 1, 3});
    int32_t out = -1;
    if (m_s.flash_attn) {
      const int32_t fa = m_g.op(GgmlOp::flash_attn_ext, k_f32, {m_d, m_h, m_ts, m_streams},
                                {qp, m_cache, m_cache, in.mask_fa});
      out = m_g.reshape(fa, {m_d * m_h, m_t, 1, 1});
      if (in.v_rot >= 0) out = rotate(out, in.v_rot);
    } else {
      int32_t kq =
          m_g.op(GgmlOp::mul_mat, k_f32, {n_kv, m_ts, m_h, m_streams}, {m_cache, qp}, "kq");
      if (m_a.attn_softcap) {
        kq = unary(GgmlOp::scale, kq);
        kq = unary(GgmlOp::unary, kq);
        kq = unary(GgmlOp::scale, kq);
      }
      kq = m_g.op(GgmlOp::soft_max, k_f32, m_g.at(kq).ne, {kq, in.mask}, "kq_soft_max");
      const int32_t kqv =
          m_g.op(GgmlOp::mul_mat, k_f32, {m_d, m_ts, m_h, m_streams}, {m_cache, kq}, "kqv");
      const int32_t perm = m_g.permute(kqv, {0, 2, 1, 3});
      out = m_g.op(GgmlOp::cont, k_f32, {m_d * m_h, m_t, 1, 1}, {perm}, "kqv_out");
    }
    return matmul(m_e, out, "attn_out");
  }

  int32_t ffn(int32_t cur) {
    const int64_t f = m_m.intermediate_size;
    const int64_t t = m_g.at(cur).ne[1];
    if (m_a.ffn == Ffn::fused_swiglu) {
      const int32_t up = matmul(2 * f, cur);
      const int32_t act = m_g.op(GgmlOp::glu, k_f32, {f, t, 1, 1}, {up});
      return matmul(m_e, act);
    }
    const int32_t gate = matmul(f, cur);
    if (!m_s.glu_op) {  // the activation and the product as two ops, each in place
      const int32_t act = unary(GgmlOp::unary, gate);
      const int32_t up = matmul(f, cur);
      return matmul(m_e, m_g.op(GgmlOp::mul, k_f32, {f, t, 1, 1}, {act, up}));
    }
    const int32_t up = matmul(f, cur);
    const int32_t act = m_g.op(GgmlOp::glu, k_f32, {f, t, 1, 1}, {gate, up});
    return matmul(m_e, act);
  }

  // Routed experts (Qwen3-MoE): softmax router, top-k, normalized weights, three expert
  // matmuls, the weighted outputs summed.
  int32_t moe(int32_t cur) {
    const int64_t n_exp = m_m.moe.n_expert;
    const int64_t k = m_m.moe.n_expert_used;
    const int64_t f = m_m.moe.expert_intermediate_size;
    const int64_t t = m_g.at(cur).ne[1];  // the tokens here (the output rows in the last layer)
    int32_t probs = matmul(n_exp, cur, "ffn_moe_logits");
    probs = unary(GgmlOp::soft_max, probs, "ffn_moe_probs");
    const int32_t probs3 = m_g.reshape(probs, {1, n_exp, t, 1});
    const int32_t order = m_g.op(GgmlOp::argsort, k_i32, {n_exp, t, 1, 1}, {probs});
    const int32_t topk = m_g.view(order, {k, t, 1, 1}, {4, 4 * static_cast<uint64_t>(n_exp), 0, 0});
    const int32_t w = m_g.op(GgmlOp::get_rows, k_f32, {1, k, t, 1}, {probs3, topk});
    const int32_t w2 = m_g.reshape(w, {k, t, 1, 1});
    int32_t sum = m_g.op(GgmlOp::sum_rows, k_f32, {1, t, 1, 1}, {w2});
    sum = unary(GgmlOp::clamp, sum);
    const int32_t wn = m_g.op(GgmlOp::div, k_f32, {k, t, 1, 1}, {w2, sum});
    const int32_t wn3 = m_g.reshape(wn, {1, k, t, 1});
    m_g.expand(wn3);
    const int32_t x = m_g.reshape(cur, {m_e, 1, t, 1});
    int32_t act = -1;
    if (!m_s.glu_op) {  // up first, then the gate, SiLU and the product
      const int32_t up = m_g.op(GgmlOp::mul_mat_id, k_f32, {f, k, t, 1}, {m_weights, x, topk});
      const int32_t gate = m_g.op(GgmlOp::mul_mat_id, k_f32, {f, k, t, 1}, {m_weights, x, topk});
      act = m_g.op(GgmlOp::mul, k_f32, {f, k, t, 1}, {unary(GgmlOp::unary, gate), up});
    } else {
      const int32_t gate = m_g.op(GgmlOp::mul_mat_id, k_f32, {f, k, t, 1}, {m_weights, x, topk});
      const int32_t up = m_g.op(GgmlOp::mul_mat_id, k_f32, {f, k, t, 1}, {m_weights, x, topk});
      act = m_g.op(GgmlOp::glu, k_f32, {f, k, t, 1}, {gate, up});
    }
    const int32_t down = m_g.op(GgmlOp::mul_mat_id, k_f32, {m_e, k, t, 1}, {m_weights, act, topk});
    const int32_t weighted = m_g.op(GgmlOp::mul, k_f32, {m_e, k, t, 1}, {down, wn3});
    const GgmlTensor& wt = m_g.at(weighted);
    std::vector<int32_t> parts;
    for (int64_t i = 0; i < k; ++i) {
      parts.push_back(m_g.view(weighted, {m_e, t, 1, 1}, {4, wt.nb[2], wt.nb[2] * t, 0},
                               static_cast<uint64_t>(i) * wt.nb[1]));
    }
    if (k == 1) return m_g.op(GgmlOp::cont, k_f32, {m_e, t, 1, 1}, {parts[0]});
    int32_t out = m_g.op(GgmlOp::add, k_f32, {m_e, t, 1, 1}, {parts[0], parts[1]});
    for (int64_t i = 2; i < k; ++i)
      out = m_g.op(GgmlOp::add, k_f32, {m_e, t, 1, 1}, {out, parts[static_cast<size_t>(i)]});
    return out;
  }

  int32_t layer(uint32_t il, int32_t inp) {
    const bool last = il + 1 == m_m.n_layer;
    int32_t cur = attention(il, norm(inp));
    int32_t residual = inp;
    if (last) cur = rows(cur);
    if (m_a.post_norms) cur = norm(cur);
    if (last) residual = rows(residual);
    const int64_t t = last ? m_out : m_t;
    const int32_t ffn_inp = m_g.op(GgmlOp::add, k_f32, {m_e, t, 1, 1}, {cur, residual});
    const bool moe_layer = m_m.is_moe() && il < m_m.layers.size() && m_m.layers[il].moe;
    cur = moe_layer ? moe(norm(ffn_inp)) : ffn(norm(ffn_inp));
    if (m_a.post_norms) cur = norm(cur);
    if (m_a.residual_first_ffn) return m_g.op(GgmlOp::add, k_f32, {m_e, t, 1, 1}, {ffn_inp, cur});
    return m_g.op(GgmlOp::add, k_f32, {m_e, t, 1, 1}, {cur, ffn_inp});
  }

  const ModelSpec& m_m;
  const LlamaGraphShape& m_s;
  Arch m_a;
  GgmlGraph m_g;
  int64_t m_t = 0;
  int64_t m_out = 0;  // output rows
  int64_t m_streams = 1;
  int64_t m_ts = 0;
  int64_t m_e = 0;
  int64_t m_d = 0;
  int64_t m_h = 0;
  int64_t m_hkv = 0;
  int32_t m_weights = -1;
  int32_t m_cache = -1;
  int32_t m_tokens = -1;
  int32_t m_pos = -1;
  int32_t m_out_ids = -1;
  int64_t m_rot_k = 0;  // rotation sizes of a quantized K / V cache (0: none)
  int64_t m_rot_v = 0;
  KvInputs m_full;
  KvInputs m_swa;
};

}  // namespace

bool llamacpp_graph_supported(const ModelSpec& m) {
  if (!arch_of(m) || m.n_layer == 0 || m.head_dim == 0 || m.n_head_kv == 0) return false;
  if (m.is_moe() && (m.model_type != "qwen3_moe" || m.moe.n_shared_expert > 0)) return false;
  for (const auto& l : m.layers) {
    if (l.attention != AttentionKind::full && !is_local(l)) return false;
  }
  return true;
}

std::optional<GgmlGraph> llamacpp_reserve_graph(const ModelSpec& m, const LlamaGraphShape& s) {
  if (!llamacpp_graph_supported(m) || s.n_tokens == 0) return std::nullopt;
  const Arch a = *arch_of(m);
  // A fused QKV's V is a strided view: rotating a quantized V cache would need a copy first,
  // which these graphs do not hold.
  if (a.fused_qkv && quantized(s.type_v) && m.head_dim % 64 == 0) return std::nullopt;
  return Builder(m, s, a).build();
}

std::optional<uint64_t> llamacpp_cpu_compute_bytes(const ModelSpec& m, const LlamaGraphShape& s) {
  auto g = llamacpp_reserve_graph(m, s);
  if (!g) return std::nullopt;
  return ggml_alloc_replay(*g, k_cpu_alignment);
}

}  // namespace kvprof::engines
