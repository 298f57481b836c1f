// Approximate parameter count of a vision tower + projector from a vision_config: every tower
// kvprof meets (SigLIP, CLIP, Pixtral, MoonViT, InternViT, Qwen-VL, Llama 4) is a ViT.
#include <algorithm>
#include <cmath>

#include "kvprof/model/hf_detail.hpp"

namespace kvprof::model::hf {
namespace {

uint64_t field_or(const json& obj, std::initializer_list<std::string_view> keys,
                  uint64_t fallback) {
  auto v = get_uint(obj, keys, k_max_dim);
  return v && v->has_value() ? **v : fallback;
}

double number_or(const json& obj, std::string_view key, double fallback) {
  auto v = get_number(obj, key);
  return v && v->has_value() ? **v : fallback;
}

}  // namespace

uint64_t estimate_vision_params(const json& vision_in, const json& outer, uint32_t text_hidden) {
  if (!vision_in.is_object()) return 0;
  auto type_field = get_string(vision_in, "model_type");
  const std::string type = type_field ? type_field->value_or("") : "";
  json vision = config_defaults(type);
  vision.update(vision_in);

  const uint64_t layers = field_or(vision, {"num_hidden_layers", "depth", "num_layers"}, 0);
  uint64_t hidden = 0;
  uint64_t inter = 0;
  uint64_t out_dim = text_hidden;
  if (vision.contains(
          "embed_dim")) {  // Qwen2-VL: embed_dim is the ViT width, hidden_size the output
    hidden = field_or(vision, {"embed_dim"}, 0);
    const double ratio = std::clamp(number_or(vision, "mlp_ratio", 4.0), 0.0, 64.0);
    inter = static_cast<uint64_t>(static_cast<double>(hidden) * ratio);
    out_dim = field_or(vision, {"hidden_size"}, text_hidden);
  } else {
    hidden = field_or(vision, {"hidden_size", "width"}, 0);
    inter = field_or(vision, {"intermediate_size", "mlp_dim"}, 4 * hidden);
    out_dim = field_or(vision, {"out_hidden_size", "projector_output_dim"}, text_hidden);
  }
  if (layers == 0 || hidden == 0) return 0;

  // Gated (SwiGLU) towers have three MLP matrices, the GELU ones two.
  auto act = get_string(vision, "hidden_act");
  const bool gated =
      type == "qwen2_5_vl" || type == "pixtral" || (act && act->value_or("") == "silu");
  const uint64_t mlp_mats = gated ? 3 : 2;
  const uint64_t per_layer = 4 * hidden * hidden + 4 * hidden              // q, k, v, o (+ biases)
                             + mlp_mats * hidden * inter + inter + hidden  // MLP (+ biases)
                             + 4 * hidden;                                 // two LayerNorms
  uint64_t total = layers * per_layer;

  const uint64_t patch = field_or(vision, {"patch_size", "spatial_patch_size"}, 14);
  const uint64_t channels = field_or(vision, {"num_channels", "in_chans", "in_channels"}, 3);
  const uint64_t temporal = field_or(vision, {"temporal_patch_size"}, 1);
  total += channels * patch * patch * temporal * hidden + hidden;  // patch embedding
  const bool rope_positions = type.starts_with("qwen2") || type == "pixtral" || type == "moonvit";
  if (const uint64_t n_pos = field_or(vision, {"num_position_embeddings"}, 0); n_pos > 0) {
    total += n_pos * hidden;
  } else if (const uint64_t image = field_or(vision, {"image_size"}, 0);
             image > 0 && patch > 0 && !rope_positions) {
    const uint64_t side = image / patch;
    total += (side * side + 1) * hidden;  // learned positions (+ class token)
  }
  total += 2 * hidden;  // final norm

  // Projector: patches merged 2x2 (Qwen merger, pixel shuffle) widen its input.
  uint64_t merge = field_or(vision, {"spatial_merge_size", "merge_kernel_size"}, 1);
  if (const json* k = find_field(vision, {"merge_kernel_size"}); k != nullptr && k->is_array()) {
    merge = 2;  // MoonViT: [2, 2]
  }
  const double shuffle =
      number_or(vision, "pixel_shuffle_ratio", number_or(outer, "downsample_ratio", 1.0));
  uint64_t proj_in = hidden * merge * merge;
  if (shuffle >= 0.1 && shuffle < 1) {
    proj_in = static_cast<uint64_t>(static_cast<double>(hidden) / (shuffle * shuffle));
  }
  if (merge > 1) {  // Qwen-VL merger: Linear(in, in) -> GELU -> Linear(in, out)
    total += proj_in * proj_in + proj_in + proj_in * out_dim + out_dim;
    return total;
  }
  const bool two_layer = proj_in != hidden || outer.contains("projector_hidden_act") ||
                         outer.contains("mm_projector_type");
  total += proj_in * out_dim + out_dim;
  if (two_layer) total += out_dim * out_dim + out_dim;  // LLaVA-style 2-layer MLP
  return total;
}

}  // namespace kvprof::model::hf
