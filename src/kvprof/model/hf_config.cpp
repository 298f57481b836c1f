// PLACEHOLDER until the full parser lands: dense Llama-style configs only.
#include "kvprof/model/hf_config.hpp"

namespace kvprof::model {

Expected<ModelSpec> parse_hf_config(const nlohmann::json& c, std::string_view source) {
  ModelSpec m;
  m.source = std::string(source);
  m.model_type = c.value("model_type", "");
  m.n_layer = c.value("num_hidden_layers", 0U);
  m.hidden_size = c.value("hidden_size", 0U);
  m.intermediate_size = c.value("intermediate_size", 0U);
  m.n_head = c.value("num_attention_heads", 0U);
  m.n_head_kv = c.value("num_key_value_heads", m.n_head);
  m.head_dim = c.value("head_dim", m.n_head ? m.hidden_size / m.n_head : 0U);
  m.vocab_size = c.value("vocab_size", 0U);
  m.max_position_embeddings = c.value("max_position_embeddings", uint64_t{0});
  m.rotary_dim = m.head_dim;
  m.tie_word_embeddings = c.value("tie_word_embeddings", false);
  m.layers.assign(m.n_layer, LayerSpec{});
  if (m.n_layer == 0) return fail(ErrorKind::input, "config has no num_hidden_layers");
  return m;
}

Expected<ModelSpec> parse_hf_config_text(std::string_view text, std::string_view source) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return fail(ErrorKind::input, "config.json is not valid JSON");
  return parse_hf_config(j, source);
}

}  // namespace kvprof::model
