// KV cache geometry.
#include "kvprof/estimate/kv.hpp"

#include <algorithm>

#include "kvprof/estimate/weights.hpp"

namespace kvprof::estimate {

using model::AttentionKind;

uint64_t kv_element_bytes_x32(KvCacheDtype kv, model::DType compute_dtype) {
  switch (kv) {
    case KvCacheDtype::auto_:
      return model::dtype_bits(compute_dtype) * 4;
    case KvCacheDtype::f16:
    case KvCacheDtype::bf16:
      return 64;
    case KvCacheDtype::f32:
      return 128;
    case KvCacheDtype::fp8_e4m3:
    case KvCacheDtype::fp8_e5m2:
      return 32;
    case KvCacheDtype::q8_0:
      return 34;
    case KvCacheDtype::q4_0:
      return 18;
  }
  return 64;
}

uint64_t dsa_bytes_per_token(const model::ModelSpec& m, const model::LayerSpec& layer,
                             uint64_t elem_x32) {
  const uint64_t latent = m.mla.kv_lora_rank;
  const uint64_t rope = m.mla.qk_rope_head_dim;
  // An fp8 cache is vLLM's and SGLang's "fp8_ds_mla": the latent in fp8 with a 4-byte scale per
  // 128 values and the rope part in bf16 (656 bytes for DeepSeek-V3.2).
  uint64_t bytes =
      elem_x32 == 32 ? latent + latent / 128 * 4 + rope * 2 : (latent + rope) * elem_x32 / 32;
  // The indexer's keys: fp8 with an fp32 scale per 128 values, whatever the cache dtype.
  const uint64_t index_dim = m.dsa.index_head_dim;
  if (layer.indexer) bytes += index_dim + (index_dim + 127) / 128 * 4;
  return bytes;
}

KvLayout kv_layout(const model::ModelSpec& m, uint32_t tp, uint32_t pp, uint32_t pp_rank,
                   KvCacheDtype kv, model::DType compute_dtype) {
  KvLayout out;
  tp = std::max<uint32_t>(tp, 1);
  const uint64_t elem_x32 = kv_element_bytes_x32(kv, compute_dtype);
  // SSM state stays in the model dtype (vLLM's mamba_ssm_cache_dtype=auto).
  const uint64_t state_elem = model::dtype_bits(compute_dtype) / 8;
  const uint32_t n_kv = std::max<uint32_t>(m.n_head_kv, 1);
  out.kv_heads_per_rank = std::max<uint32_t>(1, n_kv / tp);
  out.kv_heads_replicated = n_kv < tp;
  const auto [first, last] = pp_layer_range(m.n_layer, pp, pp_rank);
  for (uint32_t i = first; i < last; ++i) {
    const model::LayerSpec spec = i < m.layers.size() ? m.layers[i] : model::LayerSpec{};
    if (spec.kv_shared) continue;  // reads an earlier layer's cache
    KvLayerSpec l;
    l.layer = i;
    l.kind = spec.attention;
    l.window_tokens = spec.window_tokens;
    switch (spec.attention) {
      case AttentionKind::full:
      case AttentionKind::sliding:
      case AttentionKind::chunked: {
        const uint32_t heads =
            std::max<uint32_t>(1, std::max<uint32_t>(m.layer_n_head_kv(i), 1) / tp);
        l.bytes_per_token = 2ULL * heads * m.layer_head_dim(i) * elem_x32 / 32;
        break;
      }
      case AttentionKind::mla:
        // The latent and rope key are shared by all heads, so every TP rank keeps them whole.
        l.bytes_per_token =
            static_cast<uint64_t>(m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) * elem_x32 / 32;
        if (m.dsa.enabled()) l.bytes_per_token = dsa_bytes_per_token(m, spec, elem_x32);
        break;
      case AttentionKind::mamba:
      case AttentionKind::linear: {
        const auto& s = m.ssm;
        const uint64_t conv_taps = s.d_conv > 0 ? s.d_conv - 1 : 0;
        uint64_t conv_dim = 0;
        uint64_t recurrent = 0;
        if (s.kind == model::SsmSpec::Kind::mamba1) {
          conv_dim = s.d_inner / tp;
          recurrent = static_cast<uint64_t>(s.d_inner / tp) * s.d_state;
        } else if (s.kind == model::SsmSpec::Kind::mamba2) {
          conv_dim = (s.d_inner + 2ULL * s.n_groups * s.d_state) / tp;
          recurrent =
              static_cast<uint64_t>(std::max<uint32_t>(s.n_heads / tp, 1)) * s.head_dim * s.d_state;
        } else if (s.kind == model::SsmSpec::Kind::gated_delta_net) {
          conv_dim =
              (2ULL * s.n_k_heads * s.k_head_dim + static_cast<uint64_t>(s.n_heads) * s.head_dim) /
              tp;
          recurrent = static_cast<uint64_t>(std::max<uint32_t>(s.n_heads / tp, 1)) * s.k_head_dim *
                      s.head_dim;
        }
        l.state_bytes = (conv_taps * conv_dim + recurrent) * state_elem;
        break;
      }
    }
    out.kv_bytes_per_token += l.bytes_per_token;
    out.state_bytes_per_request += l.state_bytes;
    out.layers.push_back(l);
  }
  return out;
}

uint64_t request_cache_bytes(const KvLayout& layout, uint64_t tokens) {
  uint64_t bytes = 0;
  for (const auto& l : layout.layers) {
    uint64_t held = tokens;
    if ((l.kind == AttentionKind::sliding || l.kind == AttentionKind::chunked) &&
        l.window_tokens > 0) {
      held = std::min<uint64_t>(tokens, l.window_tokens);
    }
    bytes += l.bytes_per_token * held + l.state_bytes;
  }
  return bytes;
}

}  // namespace kvprof::estimate
