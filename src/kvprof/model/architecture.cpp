// Stated architectures (see architecture.hpp).
#include "kvprof/model/architecture.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kvprof/model/hf_config.hpp"

namespace kvprof::model {

bool ArchitectureHints::any() const {
  return params || n_layer || n_head || n_head_kv || head_dim || hidden_size || intermediate_size ||
         vocab_size;
}

bool ArchitectureHints::describes_a_model() const {
  return n_layer && hidden_size && n_head && *n_head > 0;
}

std::vector<std::string> check_hints(const ModelSpec& spec, const ArchitectureHints& h) {
  std::vector<std::string> notes;
  const auto check = [&](const char* key, const std::optional<uint32_t>& given, uint64_t actual) {
    if (given && actual != 0 && *given != actual) {
      notes.push_back(
          fmt::format("{} {} given, the model has {} (the model's is used)", key, *given, actual));
    }
  };
  check("num_layers", h.n_layer, spec.n_layer);
  check("hidden_size", h.hidden_size, spec.hidden_size);
  check("num_heads", h.n_head, spec.n_head);
  check("num_kv_heads", h.n_head_kv, spec.n_head_kv);
  check("head_dim", h.head_dim, spec.head_dim);
  check("intermediate_size", h.intermediate_size, spec.intermediate_size);
  check("vocab_size", h.vocab_size, spec.vocab_size);
  return notes;
}

Expected<ModelSpec> model_from_hints(const std::string& id, const ArchitectureHints& h,
                                     uint64_t max_len, const std::string& torch_dtype,
                                     std::vector<std::string>& notes) {
  if (!h.describes_a_model()) {
    return fail(ErrorKind::input,
                "describe the model with its number of layers, hidden size and heads");
  }
  const uint32_t layers = *h.n_layer, hidden = *h.hidden_size, heads = *h.n_head;
  const uint32_t kv_heads = h.n_head_kv.value_or(heads);
  const uint32_t head_dim = h.head_dim.value_or(hidden / heads);
  const uint32_t vocab = h.vocab_size.value_or(32000);
  uint64_t inter = h.intermediate_size.value_or(0);
  if (inter == 0 && h.params) {
    // params = 2 V H (embedding, output) + L (attention + 3 H I): solve for I.
    const double attn = 2.0 * hidden * heads * head_dim + 2.0 * hidden * kv_heads * head_dim;
    const double rest = *h.params - 2.0 * vocab * hidden - layers * attn;
    if (rest > 0) inter = static_cast<uint64_t>(rest / (3.0 * layers * hidden));
  }
  if (inter == 0) {
    inter = (hidden * 8ULL / 3 + 255) / 256 * 256;
    notes.push_back("intermediate_size guessed as 8/3 x hidden_size (give it or model_params)");
  }
  const nlohmann::json config = {{"architectures", {"LlamaForCausalLM"}},
                                 {"model_type", "llama"},
                                 {"num_hidden_layers", layers},
                                 {"hidden_size", hidden},
                                 {"num_attention_heads", heads},
                                 {"num_key_value_heads", kv_heads},
                                 {"head_dim", head_dim},
                                 {"intermediate_size", inter},
                                 {"vocab_size", vocab},
                                 {"max_position_embeddings", max_len},
                                 {"torch_dtype", torch_dtype}};
  auto spec = parse_hf_config(config, "the architecture given");
  if (spec) spec->id = id;
  return spec;
}

}  // namespace kvprof::model
