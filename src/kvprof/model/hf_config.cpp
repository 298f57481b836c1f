// Hugging Face config.json -> ModelSpec: picks the text decoder's config (text_config,
// llm_config, language_config), reads its dimensions with every value checked and bounded,
// sets the per-architecture structure flags, and delegates the layer schedule (hf_layers.cpp),
// quantization (hf_quant.cpp) and vision tower estimate (hf_vision.cpp).
#include "kvprof/model/hf_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "kvprof/model/hf_detail.hpp"
#include "kvprof/util/json_input.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::model {
namespace {

using hf::field_error;
using hf::find_field;
using hf::get_bool;
using hf::get_number;
using hf::get_string;
using hf::get_uint;
using hf::json;
using hf::require_uint;

constexpr size_t k_max_json_depth = 128;

// model_types whose structure kvprof models; others parse as Llama-like with a warning.
constexpr std::array<std::string_view, 69> k_known_types{"llama",
                                                         "mistral",
                                                         "mixtral",
                                                         "qwen2",
                                                         "qwen2_moe",
                                                         "qwen3",
                                                         "qwen3_moe",
                                                         "qwen3_next",
                                                         "qwen3_5",
                                                         "qwen3_5_text",
                                                         "qwen3_5_moe",
                                                         "qwen3_5_moe_text",
                                                         "qwen2_vl",
                                                         "qwen2_5_vl",
                                                         "qwen3_vl",
                                                         "qwen3_vl_text",
                                                         "qwen3_vl_moe",
                                                         "qwen3_vl_moe_text",
                                                         "gemma",
                                                         "gemma2",
                                                         "gemma3",
                                                         "gemma3_text",
                                                         "gemma4",
                                                         "gemma4_text",
                                                         "phi",
                                                         "phi3",
                                                         "phimoe",
                                                         "gpt2",
                                                         "opt",
                                                         "gpt_neox",
                                                         "gpt_bigcode",
                                                         "starcoder2",
                                                         "falcon",
                                                         "gptj",
                                                         "bloom",
                                                         "deepseek_v2",
                                                         "deepseek_v3",
                                                         "deepseek_v32",
                                                         "glm_moe_dsa",
                                                         "kimi_k2",
                                                         "llama4",
                                                         "llama4_text",
                                                         "gpt_oss",
                                                         "jamba",
                                                         "granite",
                                                         "granitemoe",
                                                         "granitemoehybrid",
                                                         "granitemoeshared",
                                                         "nemotron",
                                                         "nemotron_h",
                                                         "cohere",
                                                         "cohere2",
                                                         "olmo2",
                                                         "olmoe",
                                                         "glm4",
                                                         "glm4_moe",
                                                         "mllama",
                                                         "mllama_text_model",
                                                         "mistral3",
                                                         "smollm3",
                                                         "ernie4_5",
                                                         "ernie4_5_moe",
                                                         "bamba",
                                                         "stablelm",
                                                         "internlm2",
                                                         "chatglm",
                                                         "seed_oss",
                                                         "exaone4",
                                                         "minimax_m2"};

bool one_of(std::string_view v, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

Expected<void> read_dims(const json& t, ModelSpec& m) {
  HF_TRY(n_layer, require_uint(t, {"num_hidden_layers", "n_layer", "num_layers", "n_layers"},
                               "num_hidden_layers", hf::k_max_layers));
  HF_TRY(hidden, require_uint(t, {"hidden_size", "n_embd", "d_model", "n_embed"}, "hidden_size",
                              hf::k_max_dim));
  HF_TRY(n_head, require_uint(t, {"num_attention_heads", "n_head", "n_heads", "num_heads"},
                              "num_attention_heads", hf::k_max_heads));
  HF_TRY(vocab,
         require_uint(t, {"vocab_size", "padded_vocab_size"}, "vocab_size", hf::k_max_vocab));
  m.n_layer = static_cast<uint32_t>(n_layer);
  m.hidden_size = static_cast<uint32_t>(hidden);
  m.n_head = static_cast<uint32_t>(n_head);
  m.vocab_size = static_cast<uint32_t>(vocab);

  HF_TRY(head_dim, get_uint(t, {"head_dim", "kv_channels"}, hf::k_max_dim));
  if (head_dim && *head_dim == 0) return field_error("head_dim", "must be positive (got 0)");
  if (head_dim) {
    m.head_dim = static_cast<uint32_t>(*head_dim);
  } else {
    if (hidden % n_head != 0) {
      return field_error("hidden_size", fmt::format("({}) is not divisible by num_attention_heads "
                                                    "({}) and head_dim is absent",
                                                    hidden, n_head));
    }
    m.head_dim = static_cast<uint32_t>(hidden / n_head);
  }

  HF_TRY(n_kv,
         get_uint(t, {"num_key_value_heads", "num_kv_heads", "multi_query_group_num", "n_head_kv"},
                  hf::k_max_heads));
  HF_TRY(multi_query, get_bool(t, "multi_query"));
  if (n_kv) {
    if (*n_kv == 0) return field_error("num_key_value_heads", "must be positive (got 0)");
    m.n_head_kv = static_cast<uint32_t>(*n_kv);
  } else {
    m.n_head_kv = multi_query.value_or(false) ? 1 : m.n_head;
  }
  if (m.n_head_kv > m.n_head || m.n_head % m.n_head_kv != 0) {
    return field_error("num_key_value_heads",
                       fmt::format("({}) does not divide num_attention_heads "
                                   "({})",
                                   m.n_head_kv, m.n_head));
  }

  HF_TRY(inter, get_uint(t, {"intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"},
                         hf::k_max_dim));
  HF_TRY(inter_mlp, get_uint(t, {"intermediate_size_mlp"}, hf::k_max_dim));  // Llama 4 dense
  HF_TRY(expansion, get_number(t, "expansion_ratio"));                       // MPT
  if (inter_mlp) {
    m.intermediate_size = static_cast<uint32_t>(*inter_mlp);
  } else if (inter && *inter > 0) {
    m.intermediate_size = static_cast<uint32_t>(*inter);
  } else if (expansion && *expansion > 0 && *expansion < 64) {
    m.intermediate_size =
        static_cast<uint32_t>(std::lround(*expansion * static_cast<double>(hidden)));
  } else {
    m.intermediate_size = m.hidden_size * 4;  // GPT-2 n_inner: null, Falcon, BLOOM
    if (!one_of(m.model_type, {"gpt2", "gpt_bigcode", "falcon", "bloom", "gpt_neo", "opt"})) {
      m.warnings.push_back("intermediate_size absent; assuming 4 * hidden_size");
    }
  }

  HF_TRY(max_pos, get_uint(t,
                           {"max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                            "max_sequence_length", "n_ctx"},
                           hf::k_max_positions));
  m.max_position_embeddings = max_pos.value_or(0);
  if (!max_pos) m.warnings.push_back("max_position_embeddings absent; context length unknown");
  return {};
}

// Biases, norms, MLP shape and positions, by model_type (transformers modeling code).
Expected<void> read_hf_structure(const json& t, ModelSpec& m) {
  const std::string& type = m.model_type;
  if (one_of(type, {"phi", "gpt2", "opt", "gpt_neox", "gpt_bigcode", "starcoder2", "falcon", "gptj",
                    "bloom", "mpt", "nemotron", "nemotron_h", "codegen", "gpt_neo"})) {
    m.mlp_matrices = 2;
  }
  // Biases: defaults per family, then the explicit fields.
  if (one_of(type,
             {"phi", "gpt2", "opt", "gpt_bigcode", "starcoder2", "bloom", "phimoe", "gpt_neox"})) {
    m.attention_bias = m.o_bias = true;
    m.mlp_bias = type != "phimoe";
  }
  if (one_of(type, {"gptj", "codegen"})) m.mlp_bias = true;
  if (one_of(type, {"phi", "gpt2", "opt", "gpt_bigcode", "starcoder2", "falcon", "bloom", "gptj",
                    "phimoe", "gpt_neox", "stablelm", "codegen", "gpt_neo"})) {
    m.layer_norm_bias = true;
  }
  const bool qkv_only = one_of(type, {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "glm4",
                                      "glm4_moe", "stablelm", "internlm2", "chatglm"});
  if (one_of(type, {"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"})) m.attention_bias = true;
  for (const auto* key :
       {"attention_bias", "use_bias", "enable_bias", "bias", "use_qkv_bias", "add_qkv_bias"}) {
    if (std::string_view(key) == "bias" && type != "falcon") continue;  // Falcon's name for it
    HF_TRY(b, get_bool(t, key));
    if (!b) continue;
    m.attention_bias = *b;
    m.o_bias = *b && !qkv_only;
    if (std::string_view(key) != "attention_bias" && std::string_view(key) != "use_qkv_bias") {
      m.mlp_bias = *b;  // use_bias / enable_bias / bias cover every linear layer
    }
  }
  HF_TRY(mlp_bias, get_bool(t, "mlp_bias"));
  if (mlp_bias) m.mlp_bias = *mlp_bias;

  // Norms and residual layout.
  if (one_of(type, {"gemma2", "gemma3", "gemma3_text", "gemma4", "gemma4_text", "glm4"})) {
    m.norms_per_layer = 4;
  }
  HF_TRY(parallel, get_bool(t, "parallel_attn"));
  HF_TRY(new_arch, get_bool(t, "new_decoder_architecture"));
  HF_TRY(parallel_residual, get_bool(t, "use_parallel_residual"));
  if (one_of(type, {"phi", "gptj", "cohere", "cohere2", "codegen"}) ||
      (type == "falcon" && parallel.value_or(true) && !new_arch.value_or(false))) {
    m.parallel_attn_mlp = true;
    m.norms_per_layer = 1;
  } else if ((type == "falcon" && new_arch.value_or(false)) ||
             (type == "gpt_neox" && parallel_residual.value_or(true))) {
    m.parallel_attn_mlp = true;  // two norms, one residual add
  }
  if (one_of(type,
             {"qwen3", "qwen3_moe", "qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe",
              "qwen3_5_moe_text", "qwen3_vl", "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text",
              "gemma3", "gemma3_text", "gemma4", "gemma4_text", "olmo2", "olmoe"})) {
    m.qk_norm = true;
  }
  for (const auto* key : {"use_qk_norm", "qk_layernorm", "qk_norm"}) {
    HF_TRY(b, get_bool(t, key));
    if (b && type != "llama4" && type != "llama4_text") m.qk_norm = *b;  // Llama 4: weightless L2
  }
  HF_TRY(gate, get_bool(t, "attn_output_gate"));
  m.attn_output_gate = gate.value_or(type == "qwen3_next" || type.starts_with("qwen3_5"));

  // Positions.
  m.learned_positions = one_of(type, {"gpt2", "opt", "gpt_bigcode", "gpt_neo"});
  HF_TRY(alibi, get_bool(t, "alibi"));
  HF_TRY(pos_type, get_string(t, "position_embedding_type"));
  const bool no_rotary = m.learned_positions || type == "bloom" || alibi.value_or(false) ||
                         pos_type.value_or("") == "nope";
  if (no_rotary) {
    m.rotary_dim = 0;
  } else {
    HF_TRY(explicit_dim, get_uint(t, {"rotary_dim"}, hf::k_max_dim));
    HF_TRY(factor, get_number(t, "partial_rotary_factor"));
    HF_TRY(pct, get_number(t, "rotary_pct"));
    std::optional<double> nested_factor;
    for (const auto* key : {"rope_parameters", "rope_scaling"}) {
      if (const json* rp = find_field(t, {key}); rp != nullptr && rp->is_object()) {
        HF_TRY(f, get_number(*rp, "partial_rotary_factor"));
        if (f) nested_factor = f;
      }
    }
    const double f = factor ? *factor : pct ? *pct : nested_factor.value_or(1.0);
    if (!(f > 0 && f <= 1)) return field_error("partial_rotary_factor", "must be in (0, 1]");
    m.rotary_dim = explicit_dim ? static_cast<uint32_t>(*explicit_dim)
                                : static_cast<uint32_t>(std::lround(f * m.head_dim));
    if (m.rotary_dim > m.head_dim) return field_error("rotary_dim", "exceeds head_dim");
  }
  return {};
}

bool default_tied(std::string_view type) {
  return one_of(type, {"gemma", "gemma2", "gemma3", "gemma3_text", "gemma4", "gemma4_text", "gpt2",
                       "opt", "gpt_bigcode", "bloom", "falcon", "gpt_neo", "starcoder2", "cohere",
                       "cohere2", "smollm3"});
}

Expected<void> read_checkpoint(const json& outer, const json& t, bool nested, ModelSpec& m) {
  // Tied embeddings: the text config's own field, else the outer one, else the class default.
  HF_TRY(tied_text, get_bool(t, "tie_word_embeddings"));
  HF_TRY(tied_outer, get_bool(outer, "tie_word_embeddings"));
  m.tie_word_embeddings = tied_text    ? *tied_text
                          : tied_outer ? *tied_outer
                                       : default_tied(m.model_type);

  const json* dt = find_field(outer, {"torch_dtype", "dtype"});
  if (dt == nullptr && nested) dt = find_field(t, {"torch_dtype", "dtype"});
  if (dt == nullptr) {
    m.warnings.push_back("config names no torch_dtype; assuming bf16 weights");
  } else if (!dt->is_string()) {
    return field_error("torch_dtype", "must be a string");
  } else if (auto parsed = parse_dtype(dt->get<std::string>()); parsed) {
    m.dtype = *parsed;
  } else {
    m.warnings.push_back(fmt::format("torch_dtype '{}' not understood; assuming bf16 weights",
                                     dt->get<std::string>()));
  }

  const json* qc = find_field(outer, {"quantization_config", "compression_config"});
  if (qc == nullptr && nested) qc = find_field(t, {"quantization_config", "compression_config"});
  if (qc != nullptr) {
    HF_TRY(q, hf::parse_quantization(*qc, m.warnings));
    m.quant = std::move(q);
  }
  return {};
}

// The decoder's config: a nested text config (with transformers' defaults for the fields it
// omits), or the config itself.
const json* nested_text_config(const json& config) {
  for (const auto* key : {"text_config", "llm_config", "language_config"}) {
    if (const json* t = find_field(config, {key}); t != nullptr && t->is_object()) return t;
  }
  return nullptr;
}

}  // namespace

Expected<ModelSpec> parse_hf_config(const json& config, std::string_view source) {
  if (!config.is_object()) return fail(ErrorKind::input, "config.json must be a JSON object");
  ModelSpec m;
  m.source = std::string(source);
  m.origin = ModelSpec::Origin::hf_config;

  const json* nested = nested_text_config(config);
  json merged;
  if (nested != nullptr) {
    HF_TRY(nested_type, get_string(*nested, "model_type"));
    merged = hf::config_defaults(nested_type.value_or(""));
    merged.update(*nested);
  }
  const json& t = nested != nullptr ? merged : config;

  HF_TRY(text_type, get_string(t, "model_type"));
  HF_TRY(outer_type, get_string(config, "model_type"));
  m.model_type = text_type.value_or(outer_type.value_or(""));
  // Newer transformers name Qwen2-VL's and Qwen2.5-VL's text model "<type>_text" (same layers).
  for (const std::string_view vl : {"qwen2_vl", "qwen2_5_vl"}) {
    if (m.model_type == fmt::format("{}_text", vl)) m.model_type = std::string(vl);
  }
  for (const json* c : {&config, &t}) {
    if (const json* a = find_field(*c, {"architectures"});
        a != nullptr && a->is_array() && !a->empty() && a->front().is_string()) {
      m.architecture = a->front().get<std::string>();
      break;
    }
  }
  HF_TRY(name, get_string(config, "_name_or_path"));
  m.id = name && !name->empty() ? *name : std::string(source);

  if (auto r = read_dims(t, m); !r) return std::unexpected(r.error());
  if (auto r = read_hf_structure(t, m); !r) return std::unexpected(r.error());
  if (auto r = hf::build_layers(t, m); !r) return std::unexpected(r.error());
  // A model whose every layer routes to experts has no dense MLP to size (Qwen3.5 MoE): the
  // guessed intermediate size is never used, so it is no reason for doubt.
  const bool all_moe = m.is_moe() && !m.layers.empty() &&
                       std::all_of(m.layers.begin(), m.layers.end(), [](const auto& l) {
                         return l.moe || l.attention == AttentionKind::mamba;
                       });
  if (all_moe)
    std::erase(m.warnings, std::string("intermediate_size absent; assuming 4 * hidden_size"));
  if (auto r = read_checkpoint(config, t, nested != nullptr, m); !r)
    return std::unexpected(r.error());

  if (std::find(k_known_types.begin(), k_known_types.end(), m.model_type) == k_known_types.end()) {
    const std::string what = !m.architecture.empty() ? m.architecture
                             : !m.model_type.empty() ? m.model_type
                                                     : std::string("(no model_type)");
    m.warnings.insert(
        m.warnings.begin(),
        fmt::format("unknown architecture {}; assuming a dense Llama-like decoder", what));
  }
  if (m.model_type == "mllama" || m.model_type == "mllama_text_model") {
    m.warnings.push_back("mllama cross-attention layers are counted as self-attention layers");
  }
  if (const json* v = find_field(config, {"vision_config"}); v != nullptr && v->is_object()) {
    // Read as SGLang reads them: getattr(vision_config, ..., 24 / 1024).
    HF_TRY(vision_layers, get_uint(*v, {"num_hidden_layers"}, hf::k_max_layers));
    HF_TRY(vision_hidden, get_uint(*v, {"hidden_size"}, hf::k_max_dim));
    m.vision_layers = static_cast<uint32_t>(vision_layers.value_or(24));
    m.vision_hidden_size = static_cast<uint32_t>(vision_hidden.value_or(1024));
    m.extra_params = hf::estimate_vision_params(*v, config, m.hidden_size);
    if (m.extra_params > 0) {
      m.warnings.push_back(
          fmt::format("vision tower + projector ~{:.2f}B parameters, estimated "
                      "from vision_config (approximate)",
                      static_cast<double>(m.extra_params) / 1e9));
    }
  }
  if (find_field(config, {"audio_config"}) != nullptr) {
    m.warnings.push_back("audio encoder (audio_config) is not counted");
  }
  return m;
}

Expected<ModelSpec> parse_hf_config_text(std::string_view text, std::string_view source) {
  if (text.size() > k_max_config_json_bytes) {
    return fail(ErrorKind::input, fmt::format("{}: config.json is {} bytes, more than the 16 MiB "
                                              "kvprof reads",
                                              source, text.size()));
  }
  if (json_nesting_depth(text) > k_max_json_depth) {
    return fail(ErrorKind::input, fmt::format("{}: config.json nests deeper than {} levels", source,
                                              k_max_json_depth));
  }
  auto doc = parse_json_input(text, "config.json");
  if (!doc) return std::unexpected(doc.error().with_context(std::string(source)));
  auto spec = read_json_input("config.json", [&] { return parse_hf_config(*doc, source); });
  if (!spec) return std::unexpected(spec.error().with_context(std::string(source)));
  return spec;
}

Expected<Quantization> parse_quantization_config(const nlohmann::json& config) {
  std::vector<std::string> warnings;
  return hf::parse_quantization(config, warnings);
}

}  // namespace kvprof::model
