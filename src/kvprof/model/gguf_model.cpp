// GGUF metadata -> ModelSpec: "<arch>.*" keys as llama.cpp's converters write them (scalar or
// per-layer head counts, sliding-window layer patterns as llama.cpp applies them, MoE, MLA and
// SSM keys), structure details read from the tensor names, dtype and quantization from the
// tensor types.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <unordered_set>

#include "kvprof/model/gguf.hpp"

namespace kvprof::model {
namespace {

constexpr uint64_t k_max_gguf_layers = k_gguf_kept_numbers;

// Reads "<arch>.<suffix>" keys; remembers the first error (missing or mistyped key).
class Keys {
 public:
  Keys(const GgufFile& file, std::string arch) : m_file(file), m_arch(std::move(arch)) {}

  [[nodiscard]] std::string name(std::string_view suffix) const {
    return fmt::format("{}.{}", m_arch, suffix);
  }
  [[nodiscard]] const GgufValue* find(std::string_view suffix) const {
    return m_file.find(name(suffix));
  }

  // An unsigned scalar that fits in 32 bits, or nullopt when absent.
  std::optional<uint32_t> opt_u32(std::string_view suffix) {
    const GgufValue* v = find(suffix);
    if (v == nullptr) return std::nullopt;
    const auto u = v->is_array() ? std::nullopt : v->as_uint();
    if (!u || *u > UINT32_MAX) {
      set_error(fmt::format("key '{}' must be an unsigned 32-bit integer", name(suffix)));
      return std::nullopt;
    }
    return static_cast<uint32_t>(*u);
  }
  uint32_t req_u32(std::string_view suffix) {
    if (find(suffix) == nullptr) set_error(fmt::format("missing key '{}'", name(suffix)));
    return opt_u32(suffix).value_or(0);
  }

  // A per-layer value: a scalar repeated `n_layer` times or an array of exactly `n_layer`
  // unsigned integers; nullopt when absent.
  std::optional<std::vector<uint32_t>> opt_per_layer(std::string_view suffix, uint32_t n_layer) {
    const GgufValue* v = find(suffix);
    if (v == nullptr) return std::nullopt;
    if (!v->is_array()) {
      const auto u = opt_u32(suffix);
      if (!u) return std::nullopt;
      return std::vector<uint32_t>(n_layer, *u);
    }
    const auto elems = v->elements();
    if (v->array_length != n_layer || elems.size() != n_layer) {
      set_error(fmt::format("key '{}' has {} entries for {} layers", name(suffix), v->array_length,
                            n_layer));
      return std::nullopt;
    }
    std::vector<uint32_t> out;
    out.reserve(n_layer);
    for (const auto& e : elems) {
      const auto u = e.as_uint();
      if (e.is_array() || !u || *u > UINT32_MAX) {
        set_error(fmt::format("key '{}' must hold unsigned integers", name(suffix)));
        return std::nullopt;
      }
      out.push_back(static_cast<uint32_t>(*u));
    }
    return out;
  }

  void set_error(std::string message) {
    if (!m_error) m_error = Error{ErrorKind::input, std::move(message)};
  }
  [[nodiscard]] const std::optional<Error>& error() const { return m_error; }

 private:
  const GgufFile& m_file;
  std::string m_arch;
  std::optional<Error> m_error;
};

uint32_t max_of(const std::vector<uint32_t>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

// What kvprof knows about an architecture beyond the standard keys.
struct ArchTraits {
  std::string_view model_type;  // HF model_type
  uint32_t swa_pattern = 0;     // llama.cpp's layer pattern: of every N layers, N-1 are local
  uint32_t default_window = 0;  // window when the file has no sliding_window key
  AttentionKind local_kind = AttentionKind::sliding;
  SsmSpec::Kind ssm = SsmSpec::Kind::none;
  bool all_recurrent = false;      // every layer is an SSM mixer (mamba)
  bool parallel_attn_mlp = false;  // attention and MLP read the same normed input
};

const std::map<std::string, ArchTraits, std::less<>>& arch_table() {
  static const std::map<std::string, ArchTraits, std::less<>> table{
      {"llama", {"llama"}},
      {"mistral", {"mistral"}},
      {"qwen2", {"qwen2"}},
      {"qwen3", {"qwen3"}},
      {"qwen2moe", {"qwen2_moe"}},
      {"qwen3moe", {"qwen3_moe"}},
      {"gemma", {"gemma"}},
      {"gemma2", {"gemma2", 2, 4096}},
      {"gemma3", {"gemma3_text", 6, 0}},
      {"phi2", {"phi", 0, 0, AttentionKind::sliding, SsmSpec::Kind::none, false, true}},
      {"phi3", {"phi3"}},
      {"deepseek2", {"deepseek_v2"}},
      {"gpt-oss", {"gpt_oss", 2, 128}},
      {"gptoss", {"gpt_oss", 2, 128}},
      {"command-r", {"cohere", 0, 0, AttentionKind::sliding, SsmSpec::Kind::none, false, true}},
      {"cohere2", {"cohere2", 4, 4096, AttentionKind::sliding, SsmSpec::Kind::none, false, true}},
      {"granite", {"granite"}},
      {"granitemoe", {"granitemoe"}},
      {"granitehybrid", {"granitemoehybrid", 0, 0, AttentionKind::sliding, SsmSpec::Kind::mamba2}},
      {"llama4", {"llama4_text", 4, 8192, AttentionKind::chunked}},
      {"mamba", {"mamba", 0, 0, AttentionKind::sliding, SsmSpec::Kind::mamba1, true}},
      {"mamba2", {"mamba2", 0, 0, AttentionKind::sliding, SsmSpec::Kind::mamba2, true}},
      {"jamba", {"jamba", 0, 0, AttentionKind::sliding, SsmSpec::Kind::mamba1}},
      {"qwen3next", {"qwen3_next", 0, 0, AttentionKind::sliding, SsmSpec::Kind::gated_delta_net}},
  };
  return table;
}

// Layer kinds: recurrent layers, then local (sliding / chunked) attention patterns.
void assign_layer_kinds(ModelSpec& m, Keys& keys, const ArchTraits& traits, std::string_view arch,
                        const std::vector<uint32_t>& head_count_kv) {
  const uint32_t n = m.n_layer;
  if (traits.all_recurrent) {
    for (auto& l : m.layers)
      l.attention = AttentionKind::mamba;
    return;
  }
  if (traits.ssm == SsmSpec::Kind::gated_delta_net) {
    const uint32_t interval = keys.opt_u32("full_attention_interval").value_or(4);
    for (uint32_t i = 0; i < n; ++i) {
      if (interval == 0 || (i + 1) % interval != 0) m.layers[i].attention = AttentionKind::linear;
    }
  } else if (traits.ssm != SsmSpec::Kind::none) {
    // Hybrids (Jamba, Granite 4): a layer without KV heads is an SSM layer.
    for (uint32_t i = 0; i < n; ++i) {
      if (head_count_kv[i] == 0) m.layers[i].attention = AttentionKind::mamba;
    }
  }

  const uint32_t window = keys.opt_u32("attention.sliding_window").value_or(traits.default_window);
  std::vector<bool> local(n, false);
  bool have_pattern = false;
  if (const GgufValue* p = keys.find("attention.sliding_window_pattern"); p != nullptr) {
    have_pattern = true;
    if (p->is_array()) {
      const auto elems = p->elements();
      if (p->array_length != n || elems.size() != n) {
        keys.set_error(fmt::format("key '{}' has {} entries for {} layers",
                                   keys.name("attention.sliding_window_pattern"), p->array_length,
                                   n));
        return;
      }
      for (uint32_t i = 0; i < n; ++i) {
        const auto* b = std::get_if<bool>(&elems[i].value);
        local[i] = b != nullptr ? *b : elems[i].as_uint().value_or(0) != 0;
      }
    } else {
      const uint32_t every = keys.opt_u32("attention.sliding_window_pattern").value_or(0);
      for (uint32_t i = 0; i < n; ++i)
        local[i] = every == 0 || i % every < every - 1;
    }
  } else if (traits.swa_pattern > 0) {
    have_pattern = true;
    for (uint32_t i = 0; i < n; ++i)
      local[i] = i % traits.swa_pattern < traits.swa_pattern - 1;
  }
  if (!have_pattern || window == 0) {
    if (window > 0 && keys.find("attention.sliding_window") != nullptr) {
      m.warnings.push_back(fmt::format(
          "{} has a sliding window of {} tokens but llama.cpp applies none to '{}'; all layers are "
          "counted as full attention",
          keys.name("attention.sliding_window"), window, arch));
    } else if (have_pattern && window == 0) {
      m.warnings.push_back(fmt::format("no {}; all layers are counted as full attention",
                                       keys.name("attention.sliding_window")));
    }
    return;
  }
  for (uint32_t i = 0; i < n; ++i) {
    if (local[i] && m.layers[i].attention == AttentionKind::full) {
      m.layers[i].attention = traits.local_kind;
      m.layers[i].window_tokens = window;
    }
  }
}

// SSM mixer dimensions from "<arch>.ssm.*".
void read_ssm(ModelSpec& m, Keys& keys, SsmSpec::Kind kind) {
  SsmSpec& s = m.ssm;
  s.kind = kind;
  s.d_conv = keys.req_u32("ssm.conv_kernel");
  s.d_inner = keys.req_u32("ssm.inner_size");
  s.d_state = keys.req_u32("ssm.state_size");
  const uint32_t time_step_rank = keys.opt_u32("ssm.time_step_rank").value_or(0);
  const uint32_t groups = keys.opt_u32("ssm.group_count").value_or(0);
  switch (kind) {
    case SsmSpec::Kind::mamba1:
      s.dt_rank = time_step_rank;
      break;
    case SsmSpec::Kind::mamba2:
      s.n_groups = groups;
      s.n_heads = time_step_rank;  // llama.cpp stores mamba2's head count here
      s.head_dim = s.n_heads > 0 ? s.d_inner / s.n_heads : 0;
      break;
    case SsmSpec::Kind::gated_delta_net:
      s.n_k_heads = groups;
      s.k_head_dim = s.d_state;
      s.n_heads = time_step_rank;
      s.head_dim = s.n_heads > 0 ? s.d_inner / s.n_heads : 0;
      break;
    case SsmSpec::Kind::none:
      break;
  }
}

// Mixture-of-experts dimensions; MoE layers are those with a router tensor.
void read_moe(ModelSpec& m, Keys& keys, std::string_view arch,
              const std::unordered_set<std::string>& names,
              const std::map<std::string, const TensorInfo*, std::less<>>& by_name) {
  const uint32_t n_expert = keys.opt_u32("expert_count").value_or(0);
  if (n_expert == 0) return;
  MoeSpec& moe = m.moe;
  moe.n_expert = n_expert;
  moe.n_expert_used = keys.opt_u32("expert_used_count").value_or(0);
  if (moe.n_expert_used == 0)
    keys.set_error(fmt::format("missing key '{}'", keys.name("expert_used_count")));
  const auto find_shape = [&](std::string_view suffix) -> const TensorInfo* {
    for (uint32_t i = 0; i < m.n_layer; ++i) {
      const auto it = by_name.find(fmt::format("blk.{}.{}", i, suffix));
      if (it != by_name.end()) return it->second;
    }
    return nullptr;
  };
  if (auto ff = keys.opt_u32("expert_feed_forward_length")) {
    moe.expert_intermediate_size = *ff;
  } else if (const TensorInfo* t = find_shape("ffn_up_exps.weight"); t && t->shape.size() >= 2) {
    moe.expert_intermediate_size = static_cast<uint32_t>(t->shape[1]);
  } else {
    moe.expert_intermediate_size = m.intermediate_size;
  }
  const TensorInfo* shexp = find_shape("ffn_up_shexp.weight");
  moe.n_shared_expert = keys.opt_u32("expert_shared_count").value_or(shexp != nullptr ? 1 : 0);
  if (moe.n_shared_expert > 0) {
    if (auto ff = keys.opt_u32("expert_shared_feed_forward_length")) {
      moe.shared_expert_intermediate_size = *ff;
    } else if (shexp != nullptr && shexp->shape.size() >= 2) {
      moe.shared_expert_intermediate_size =
          static_cast<uint32_t>(shexp->shape[1] / moe.n_shared_expert);
    } else {
      moe.shared_expert_intermediate_size = moe.expert_intermediate_size;
    }
  }
  moe.shared_expert_gate = find_shape("ffn_gate_inp_shexp.weight") != nullptr;
  moe.router_bias = find_shape("ffn_gate_inp.bias") != nullptr;
  moe.expert_bias = find_shape("ffn_up_exps.bias") != nullptr;
  if (arch == "gpt-oss" || arch == "gptoss") moe.router_bias = moe.expert_bias = true;

  const uint32_t leading_dense = keys.opt_u32("leading_dense_block_count").value_or(0);
  bool any_router = false;
  for (uint32_t i = 0; i < m.n_layer; ++i) {
    if (names.contains(fmt::format("blk.{}.ffn_gate_inp.weight", i))) {
      m.layers[i].moe = true;
      any_router = true;
    }
  }
  if (!any_router) {
    for (uint32_t i = leading_dense; i < m.n_layer; ++i)
      m.layers[i].moe = true;
  }
}

// Multi-head latent attention (DeepSeek V2/V3 and relatives).
void read_mla(ModelSpec& m, Keys& keys) {
  MlaSpec& mla = m.mla;
  mla.kv_lora_rank = keys.opt_u32("attention.kv_lora_rank").value_or(0);
  if (mla.kv_lora_rank == 0) return;
  mla.q_lora_rank = keys.opt_u32("attention.q_lora_rank").value_or(0);
  mla.qk_rope_head_dim = keys.req_u32("rope.dimension_count");
  // Newer converters store the latent widths in key/value_length and the per-head widths in
  // the _mla keys; older ones store the per-head widths in key/value_length.
  const bool new_layout = keys.find("attention.key_length_mla") != nullptr;
  const uint32_t k_len =
      new_layout ? keys.req_u32("attention.key_length_mla") : keys.req_u32("attention.key_length");
  mla.v_head_dim = new_layout ? keys.req_u32("attention.value_length_mla")
                              : keys.req_u32("attention.value_length");
  if (k_len < mla.qk_rope_head_dim) {
    keys.set_error(fmt::format("key length {} is smaller than the rope dimension {}", k_len,
                               mla.qk_rope_head_dim));
    return;
  }
  mla.qk_nope_head_dim = k_len - mla.qk_rope_head_dim;
  m.head_dim = k_len;
  m.rotary_dim = mla.qk_rope_head_dim;
  m.n_head_kv = m.n_head;  // as HF configs state it; the cache holds one latent per token
  for (auto& l : m.layers) {
    if (l.attention == AttentionKind::full) l.attention = AttentionKind::mla;
  }
}

// Structure flags and tied embeddings from the tensor names of the first attention layer.
void read_gguf_structure(ModelSpec& m, const std::unordered_set<std::string>& names,
                         const ArchTraits& traits) {
  const auto has = [&](std::string_view n) { return names.contains(std::string(n)); };
  m.tie_word_embeddings = has("token_embd.weight") && !has("output.weight");
  m.learned_positions = has("position_embd.weight");
  uint32_t layer = 0;
  for (uint32_t i = 0; i < m.n_layer; ++i) {
    if (m.layers[i].attention != AttentionKind::mamba &&
        m.layers[i].attention != AttentionKind::linear) {
      layer = i;
      break;
    }
  }
  const auto blk = [&](std::string_view suffix) {
    return has(fmt::format("blk.{}.{}", layer, suffix));
  };
  m.attention_bias = blk("attn_q.bias") || blk("attn_qkv.bias") || blk("attn_k.bias");
  m.o_bias = blk("attn_output.bias");
  m.qk_norm = blk("attn_q_norm.weight") || blk("attn_k_norm.weight");
  m.mlp_bias = blk("ffn_up.bias") || blk("ffn_down.bias");
  m.layer_norm_bias = blk("attn_norm.bias");
  if (blk("ffn_up.weight") && !blk("ffn_gate.weight")) m.mlp_matrices = 2;
  uint32_t norms = 0;
  for (std::string_view n : {"attn_norm.weight", "ffn_norm.weight", "post_attention_norm.weight",
                             "post_ffw_norm.weight"}) {
    norms += blk(n) ? 1 : 0;
  }
  if (norms > 0) m.norms_per_layer = norms;
  m.parallel_attn_mlp = traits.parallel_attn_mlp;
}

// dtype from the dominant float type; quantization from the file type or the dominant type.
void read_types(ModelSpec& m, const GgufFile& f) {
  std::map<uint32_t, uint64_t> bytes_by_type;
  for (size_t i = 0; i < f.tensors.size() && i < f.tensor_types.size(); ++i) {
    bytes_by_type[f.tensor_types[i]] += f.tensors[i].bytes;
  }
  const auto bytes_of = [&](uint32_t t) {
    const auto it = bytes_by_type.find(t);
    return it == bytes_by_type.end() ? uint64_t{0} : it->second;
  };
  constexpr uint32_t k_f32 = 0, k_f16 = 1, k_bf16 = 30;
  if (bytes_of(k_bf16) > 0 || bytes_of(k_f16) > 0) {
    m.dtype = bytes_of(k_bf16) > bytes_of(k_f16) ? DType::bf16 : DType::f16;
  } else if (bytes_of(k_f32) > 0 && bytes_by_type.size() == 1) {
    m.dtype = DType::f32;
  } else {
    m.dtype = DType::f16;
  }
  uint32_t dominant = k_f16;
  uint64_t dominant_bytes = 0;
  for (const auto& [type, bytes] : bytes_by_type) {
    if (bytes > dominant_bytes) {
      dominant = type;
      dominant_bytes = bytes;
    }
  }
  Quantization& q = m.quant;
  q.method = QuantMethod::gguf;
  const auto block = ggml_block(dominant).value_or(GgmlBlock{1, 2});
  q.weight_bits = block.block_bytes * 8 / block.block_elements;
  q.group_size = block.block_elements > 1 ? static_cast<int32_t>(block.block_elements) : -1;
  q.weight_float = ggml_type_is_float(dominant) || dominant == 39 || dominant == 40;
  q.format = ggml_type_name(dominant).value_or("F16");
  if (const GgufValue* ft = f.find("general.file_type"); ft != nullptr) {
    if (const auto id = ft->as_uint()) {
      if (auto name = llama_file_type_name(*id)) q.format = *name;
    }
  }
}

}  // namespace

Expected<ModelSpec> model_from_gguf(const GgufFile& gguf, std::string_view source) {
  const GgufValue* arch_value = gguf.find("general.architecture");
  if (arch_value == nullptr || arch_value->as_string() == nullptr ||
      arch_value->as_string()->empty()) {
    return fail(ErrorKind::input, "GGUF: missing key 'general.architecture'");
  }
  const std::string arch = *arch_value->as_string();
  ModelSpec m;
  m.origin = ModelSpec::Origin::gguf;
  m.source = std::string(source);
  m.id = std::string(source);
  if (m.id.empty()) {
    if (const GgufValue* n = gguf.find("general.name"); n && n->as_string()) m.id = *n->as_string();
  }
  m.architecture = arch;
  const auto& table = arch_table();
  const auto known = table.find(arch);
  const ArchTraits traits = known != table.end() ? known->second : ArchTraits{};
  m.model_type = known != table.end() ? std::string(traits.model_type) : arch;
  if (known == table.end()) {
    m.warnings.push_back(fmt::format(
        "GGUF architecture '{}' is not one kvprof knows; read with the common keys", arch));
  }

  Keys keys(gguf, arch);
  const auto fail_with = [&]() -> Expected<ModelSpec> {
    return fail(ErrorKind::input, "GGUF: " + keys.error()->message);
  };
  m.n_layer = keys.req_u32("block_count");
  if (keys.error()) return fail_with();
  if (m.n_layer == 0 || m.n_layer > k_max_gguf_layers) {
    return fail(ErrorKind::input,
                fmt::format("GGUF: {} is {} (1 to {} supported)", keys.name("block_count"),
                            m.n_layer, k_max_gguf_layers));
  }
  m.layers.assign(m.n_layer, LayerSpec{});
  m.hidden_size = keys.req_u32("embedding_length");

  const auto ff = keys.opt_per_layer("feed_forward_length", m.n_layer);
  m.intermediate_size = ff ? max_of(*ff) : 0;

  std::vector<uint32_t> head_count(m.n_layer, 0);
  if (auto h = keys.opt_per_layer("attention.head_count", m.n_layer)) {
    head_count = std::move(*h);
  } else if (!traits.all_recurrent) {
    keys.req_u32("attention.head_count");
  }
  m.n_head = max_of(head_count);
  std::vector<uint32_t> head_count_kv =
      keys.opt_per_layer("attention.head_count_kv", m.n_layer).value_or(head_count);
  m.n_head_kv = max_of(head_count_kv);
  if (keys.error()) return fail_with();
  for (uint32_t i = 0; i < m.n_layer; ++i) {
    if (head_count_kv[i] != 0 && head_count_kv[i] != m.n_head_kv) {
      m.warnings.push_back(fmt::format("{} differs between layers; the largest ({}) is used",
                                       keys.name("attention.head_count_kv"), m.n_head_kv));
      break;
    }
  }

  if (auto k = keys.opt_u32("attention.key_length")) {
    m.head_dim = *k;
  } else if (m.n_head > 0) {
    m.head_dim = m.hidden_size / m.n_head;
  }
  if (auto v = keys.opt_u32("attention.value_length");
      v && *v != m.head_dim && keys.find("attention.kv_lora_rank") == nullptr) {
    m.warnings.push_back(fmt::format("value heads ({}) differ from key heads ({}); kvprof uses {}",
                                     *v, m.head_dim, m.head_dim));
  }
  m.rotary_dim = keys.opt_u32("rope.dimension_count").value_or(m.head_dim);
  if (auto ctx = keys.opt_u32("context_length")) {
    m.max_position_embeddings = *ctx;
  } else {
    m.warnings.push_back(fmt::format("no {} in the file", keys.name("context_length")));
  }

  std::map<std::string, const TensorInfo*, std::less<>> by_name;
  std::unordered_set<std::string> names;
  for (const auto& t : gguf.tensors) {
    by_name.emplace(t.name, &t);
    names.insert(t.name);
  }
  if (auto vocab = keys.opt_u32("vocab_size")) {
    m.vocab_size = *vocab;
  } else if (auto n = gguf.array_length("tokenizer.ggml.tokens"); n && *n <= UINT32_MAX) {
    m.vocab_size = static_cast<uint32_t>(*n);
  } else if (auto it = by_name.find("token_embd.weight");
             it != by_name.end() && it->second->shape.size() == 2) {
    m.vocab_size = static_cast<uint32_t>(std::min<uint64_t>(it->second->shape[1], UINT32_MAX));
  } else {
    m.warnings.push_back("vocabulary size unknown (no vocab_size, token list or token_embd)");
  }

  assign_layer_kinds(m, keys, traits, arch, head_count_kv);
  if (traits.ssm != SsmSpec::Kind::none) read_ssm(m, keys, traits.ssm);
  if (traits.ssm == SsmSpec::Kind::gated_delta_net) m.attn_output_gate = true;
  read_moe(m, keys, arch, names, by_name);
  read_mla(m, keys);
  if (keys.error()) return fail_with();
  if (m.n_head == 0 && !traits.all_recurrent) {
    return fail(ErrorKind::input, fmt::format("GGUF: {} is 0", keys.name("attention.head_count")));
  }
  if (m.intermediate_size == 0 && !m.is_moe() && !traits.all_recurrent) {
    return fail(ErrorKind::input,
                fmt::format("GGUF: missing key '{}'", keys.name("feed_forward_length")));
  }

  m.tensors = gguf.tensors;
  for (size_t i = 0; i < m.tensors.size() && i < gguf.tensor_offsets.size(); ++i) {
    m.tensors[i].offset_bytes = gguf.tensor_offsets[i];
  }
  read_gguf_structure(m, names, traits);
  read_types(m, gguf);
  return m;
}

}  // namespace kvprof::model
