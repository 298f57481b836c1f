// Checked readers of config.json fields, and transformers' defaults for sub-configs that
// publishers leave sparse (Gemma 3's text_config, SigLIP/CLIP vision towers).
#include <fmt/format.h>

#include <cmath>

#include "kvprof/model/hf_detail.hpp"

namespace kvprof::model::hf {

std::unexpected<Error> field_error(std::string_view key, std::string_view what) {
  return fail(ErrorKind::input, fmt::format("config field '{}' {}", key, what));
}

const json* find_field(const json& obj, std::initializer_list<std::string_view> keys,
                       std::string* found) {
  if (!obj.is_object()) return nullptr;
  for (const auto key : keys) {
    const auto it = obj.find(std::string(key));
    if (it != obj.end() && !it->is_null()) {
      if (found != nullptr) *found = std::string(key);
      return &*it;
    }
  }
  return nullptr;
}

namespace {

Expected<uint64_t> as_uint(const json& v, std::string_view key, uint64_t max_value) {
  uint64_t out = 0;
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    const auto i = v.get<int64_t>();
    if (i < 0) return field_error(key, fmt::format("must not be negative (got {})", i));
    out = static_cast<uint64_t>(i);
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < 0 || d != std::floor(d) || d > static_cast<double>(max_value)) {
      return field_error(key,
                         fmt::format("must be a whole number up to {} (got {})", max_value, d));
    }
    out = static_cast<uint64_t>(d);
  } else {
    return field_error(key, fmt::format("must be a number (got {})", v.type_name()));
  }
  if (out > max_value) {
    return field_error(key, fmt::format("is implausibly large ({} > {})", out, max_value));
  }
  return out;
}

}  // namespace

Expected<std::optional<uint64_t>> get_uint(const json& obj,
                                           std::initializer_list<std::string_view> keys,
                                           uint64_t max_value) {
  std::string key;
  const json* v = find_field(obj, keys, &key);
  if (v == nullptr) return std::optional<uint64_t>{};
  auto n = as_uint(*v, key, max_value);
  if (!n) return std::unexpected(n.error());
  return std::optional<uint64_t>{*n};
}

Expected<uint64_t> require_uint(const json& obj, std::initializer_list<std::string_view> keys,
                                std::string_view canonical, uint64_t max_value) {
  std::string key;
  const json* v = find_field(obj, keys, &key);
  if (v == nullptr) return field_error(canonical, "is missing");
  auto n = as_uint(*v, key, max_value);
  if (!n) return n;
  if (*n == 0) return field_error(key, "must be positive (got 0)");
  return n;
}

Expected<std::optional<double>> get_number(const json& obj, std::string_view key) {
  const json* v = find_field(obj, {key});
  if (v == nullptr) return std::optional<double>{};
  if (!v->is_number())
    return field_error(key, fmt::format("must be a number (got {})", v->type_name()));
  const double d = v->get<double>();
  if (!std::isfinite(d)) return field_error(key, "must be finite");
  return std::optional<double>{d};
}

Expected<std::optional<bool>> get_bool(const json& obj, std::string_view key) {
  const json* v = find_field(obj, {key});
  if (v == nullptr) return std::optional<bool>{};
  if (!v->is_boolean()) {
    return field_error(key, fmt::format("must be true or false (got {})", v->type_name()));
  }
  return std::optional<bool>{v->get<bool>()};
}

Expected<std::optional<std::string>> get_string(const json& obj, std::string_view key) {
  const json* v = find_field(obj, {key});
  if (v == nullptr) return std::optional<std::string>{};
  if (!v->is_string()) {
    return field_error(key, fmt::format("must be a string (got {})", v->type_name()));
  }
  return std::optional<std::string>{v->get<std::string>()};
}

Expected<std::vector<std::string>> get_string_list(const json& obj, std::string_view key) {
  std::vector<std::string> out;
  const json* v = find_field(obj, {key});
  if (v == nullptr) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
    return out;
  }
  if (!v->is_array()) return field_error(key, "must be a list of strings");
  for (const auto& e : *v) {
    if (!e.is_string()) return field_error(key, "must be a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

Expected<std::optional<std::vector<uint64_t>>> get_uint_list(const json& obj, std::string_view key,
                                                             uint64_t max_value) {
  const json* v = find_field(obj, {key});
  if (v == nullptr) return std::optional<std::vector<uint64_t>>{};
  if (!v->is_array()) return field_error(key, "must be a list of integers");
  if (v->size() > k_max_layers) return field_error(key, "has too many entries");
  std::vector<uint64_t> out;
  out.reserve(v->size());
  for (const auto& e : *v) {
    auto n = as_uint(e, key, max_value);
    if (!n) return std::unexpected(n.error());
    out.push_back(*n);
  }
  return std::optional<std::vector<uint64_t>>{std::move(out)};
}

json config_defaults(std::string_view model_type) {
  // Values of the transformers configuration classes' __init__ defaults.
  if (model_type == "gemma3_text") {
    return json{{"vocab_size", 262208},
                {"hidden_size", 2304},
                {"intermediate_size", 9216},
                {"num_hidden_layers", 26},
                {"num_attention_heads", 8},
                {"num_key_value_heads", 4},
                {"head_dim", 256},
                {"max_position_embeddings", 131072},
                {"sliding_window", 4096},
                {"sliding_window_pattern", 6},
                {"tie_word_embeddings", true},
                {"attention_bias", false}};
  }
  if (model_type == "llama") {
    return json{{"vocab_size", 32000},         {"hidden_size", 4096},
                {"intermediate_size", 11008},  {"num_hidden_layers", 32},
                {"num_attention_heads", 32},   {"max_position_embeddings", 2048},
                {"tie_word_embeddings", false}};
  }
  if (model_type == "mistral") {
    return json{{"vocab_size", 32000},
                {"hidden_size", 4096},
                {"intermediate_size", 14336},
                {"num_hidden_layers", 32},
                {"num_attention_heads", 32},
                {"num_key_value_heads", 8},
                {"max_position_embeddings", 131072},
                {"tie_word_embeddings", false}};
  }
  if (model_type == "siglip_vision_model") {
    return json{{"hidden_size", 768},        {"intermediate_size", 3072}, {"num_hidden_layers", 12},
                {"num_attention_heads", 12}, {"image_size", 224},         {"patch_size", 16},
                {"num_channels", 3}};
  }
  if (model_type == "clip_vision_model") {
    return json{{"hidden_size", 768},        {"intermediate_size", 3072}, {"num_hidden_layers", 12},
                {"num_attention_heads", 12}, {"image_size", 224},         {"patch_size", 32},
                {"num_channels", 3}};
  }
  if (model_type == "pixtral") {
    return json{{"hidden_size", 1024},       {"intermediate_size", 4096}, {"num_hidden_layers", 24},
                {"num_attention_heads", 16}, {"image_size", 1024},        {"patch_size", 16},
                {"num_channels", 3}};
  }
  return json::object();
}

}  // namespace kvprof::model::hf
