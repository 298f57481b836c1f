// Private to the config.json parser (hf_*.cpp): checked JSON field readers, and the parts of
// parse_hf_config that live in their own files (layer schedule, MoE, SSM, quantization, vision).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

// Declares `var` from an Expected `expr`, or returns its error from the enclosing function.
#define HF_TRY(var, expr)                                          \
  auto var##_result = (expr);                                      \
  if (!var##_result) return std::unexpected(var##_result.error()); \
  auto var = std::move(*var##_result)

namespace kvprof::model::hf {

using nlohmann::json;

// Upper bounds on config values; anything larger is a corrupt or hostile file.
inline constexpr uint64_t k_max_layers = 100'000;
inline constexpr uint64_t k_max_dim = 1ULL << 22;  // hidden / intermediate / head sizes
inline constexpr uint64_t k_max_heads = 1ULL << 16;
inline constexpr uint64_t k_max_vocab = 1ULL << 27;
inline constexpr uint64_t k_max_experts = 1ULL << 16;
inline constexpr uint64_t k_max_positions = 1ULL << 40;

// The value of the first of `keys` present in `obj` and not null; nullptr otherwise. `found`
// receives the key that matched.
const json* find_field(const json& obj, std::initializer_list<std::string_view> keys,
                       std::string* found = nullptr);

// Reads the first present of `keys` as an integer in [0, max_value] (integral floats accepted);
// nullopt when absent or null; an input error naming the key otherwise.
Expected<std::optional<uint64_t>> get_uint(const json& obj,
                                           std::initializer_list<std::string_view> keys,
                                           uint64_t max_value);

// Like get_uint but the field must be present and in [1, max_value]; the error names
// `canonical` when it is missing.
Expected<uint64_t> require_uint(const json& obj, std::initializer_list<std::string_view> keys,
                                std::string_view canonical, uint64_t max_value);

// Reads a finite number; nullopt when absent or null; an input error naming the key otherwise.
Expected<std::optional<double>> get_number(const json& obj, std::string_view key);

// Reads a boolean; nullopt when absent or null; an input error naming the key otherwise.
Expected<std::optional<bool>> get_bool(const json& obj, std::string_view key);

// Reads a string; nullopt when absent or null; an input error naming the key otherwise.
Expected<std::optional<std::string>> get_string(const json& obj, std::string_view key);

// Reads a list of strings (a lone string is a list of one); empty when absent or null.
Expected<std::vector<std::string>> get_string_list(const json& obj, std::string_view key);

// Reads a list of integers in [0, max_value]; nullopt when absent or null.
Expected<std::optional<std::vector<uint64_t>>> get_uint_list(const json& obj, std::string_view key,
                                                             uint64_t max_value);

// Returns an input error "config field '<key>' <what>".
std::unexpected<Error> field_error(std::string_view key, std::string_view what);

// transformers' defaults for a nested sub-config (text_config of Gemma 3, vision towers) that
// omits fields; an empty object when kvprof knows none for `model_type`.
json config_defaults(std::string_view model_type);

// Fills m.layers (attention kind, window, moe), m.mla, m.moe, m.ssm and n_mtp_layers from the
// text config `t`; m's dimensions and model_type must already be set.
Expected<void> build_layers(const json& t, ModelSpec& m);

// Parses a quantization_config / compression_config object; an input error names an unknown
// quant_method or a malformed field. Guesses are appended to `warnings`.
Expected<Quantization> parse_quantization(const json& qc, std::vector<std::string>& warnings);

// Approximate parameters of a vision tower + projector described by `vision` (ViT-like), for a
// text model of width `text_hidden`; the outer config supplies projector hints.
uint64_t estimate_vision_params(const json& vision, const json& outer, uint32_t text_hidden);

}  // namespace kvprof::model::hf
