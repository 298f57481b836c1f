// llama-quantize's per-tensor type choice for the k-quant and legacy mixes (see gguf_mix.hpp).
// The rules follow llama.cpp's src/llama-quant.cpp (llama_tensor_get_type) for the mixes listed
// here, without an importance matrix and without --pure or per-tensor overrides.
#include "kvprof/model/gguf_mix.hpp"

#include <array>

#include "kvprof/model/gguf.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::model {
namespace {

constexpr std::array<std::pair<std::string_view, std::pair<uint32_t, uint32_t>>, 10> k_mixes = {{
    {"Q8_0", {7, ggml_type::q8_0}},
    {"MXFP4_MOE", {38, ggml_type::mxfp4}},
    {"Q6_K", {18, ggml_type::q6_k}},
    {"Q5_K_M", {17, ggml_type::q5_k}},
    {"Q5_K_S", {16, ggml_type::q5_k}},
    {"Q5_0", {8, ggml_type::q5_0}},
    {"Q4_K_M", {15, ggml_type::q4_k}},
    {"Q4_K_S", {14, ggml_type::q4_k}},
    {"Q4_1", {3, ggml_type::q4_1}},
    {"Q4_0", {2, ggml_type::q4_0}},
}};

enum class Category { token_embd, attn_q, attn_k, attn_v, attn_output, ffn_down, output, other };

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

Category category_of(std::string_view name) {
  if (name == "output.weight") return Category::output;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight")
    return Category::token_embd;
  // attn_qkv and attn_kv_b are treated like attn_v.
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") ||
      contains(name, "attn_v.weight")) {
    return Category::attn_v;
  }
  if (contains(name, "attn_k.weight")) return Category::attn_k;
  if (contains(name, "attn_q.weight")) return Category::attn_q;
  if (contains(name, "attn_output.weight")) return Category::attn_output;
  if (contains(name, "ffn_down")) return Category::ffn_down;
  return Category::other;
}

// Whether llama-quantize quantizes this tensor at all.
bool quantizable(const MixTensor& t) {
  const std::string_view name = t.name;
  if (t.shape.size() < 2 || !name.ends_with("weight")) return false;
  return !contains(name, "_norm.weight") && !contains(name, "ffn_gate_inp.weight") &&
         !contains(name, "ssm_conv1d") && !contains(name, "attn_rel_b.weight");
}

// The layer a block tensor belongs to ("blk.12.ffn_down.weight" -> 12).
int layer_of(std::string_view name, int fallback) {
  if (!name.starts_with("blk.")) return fallback;
  int v = 0;
  size_t i = 4;
  if (i >= name.size() || name[i] < '0' || name[i] > '9') return fallback;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && v < 1'000'000)
    v = v * 10 + (name[i++] - '0');
  return v;
}

bool use_more_bits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// A type whose blocks do not divide the rows falls back as llama-quantize does.
uint32_t fallback(uint32_t type, uint64_t ncols) {
  const auto fits = [&](uint32_t t) {
    const auto b = ggml_block(t);
    return b && ncols % b->block_elements == 0;
  };
  if (fits(type)) return type;
  uint32_t next = ggml_type::f16;
  if (type == ggml_type::q4_k) next = ggml_type::q5_0;
  if (type == ggml_type::q5_k) next = ggml_type::q5_1;
  if (type == ggml_type::q6_k) next = ggml_type::q8_0;
  return fits(next) ? next : ggml_type::f16;
}

}  // namespace

std::string gguf_mix_names() {
  std::string out;
  for (const auto& [name, ids] : k_mixes)
    out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

std::optional<GgufMix> find_gguf_mix(std::string_view name) {
  for (const auto& [n, ids] : k_mixes) {
    if (iequals(name, n)) return GgufMix{std::string(n), ids.first, ids.second};
  }
  return std::nullopt;
}

std::vector<uint32_t> assign_mix_types(const GgufMix& mix, const MixModel& model,
                                       std::span<const MixTensor> tensors) {
  int n_attention_wv = 0;
  bool tied_embeddings = true;
  for (const auto& t : tensors) {
    if (category_of(t.name) == Category::attn_v) ++n_attention_wv;
    if (t.name == "output.weight") tied_embeddings = false;
  }
  const int n_layer = static_cast<int>(model.n_layer);
  // llama.cpp calls an 80-layer GQA llama (and qwen2) a 70B model and gives its attn_v more bits.
  const bool is_70b =
      n_layer == 80 && model.n_gqa > 1 && (model.arch == "llama" || model.arch == "qwen2");
  const bool falcon = model.arch == "falcon";
  const bool q4_k_m = mix.name == "Q4_K_M", q5_k_m = mix.name == "Q5_K_M";
  const bool q4_k_s = mix.name == "Q4_K_S";
  int i_attention_wv = 0, i_ffn_down = 0;
  std::vector<uint32_t> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) {
    if (!quantizable(t)) {
      out.push_back(ggml_type::f32);
      continue;
    }
    // MXFP4_MOE: the experts (3-D tensors) MXFP4, every other matrix Q8_0 (llama-quant.cpp).
    if (mix.default_type == ggml_type::mxfp4) {
      const bool expert = t.shape.size() > 2 && t.shape[2] > 1;
      out.push_back(fallback(expert ? ggml_type::mxfp4 : ggml_type::q8_0, t.shape[0]));
      continue;
    }
    const Category cat = category_of(t.name);
    uint32_t type = mix.default_type;
    if (cat == Category::output || (tied_embeddings && cat == Category::token_embd)) {
      const auto b = ggml_block(type);
      if (falcon || !b || t.shape[0] % b->block_elements != 0) {
        type = ggml_type::q8_0;
      } else if (type != ggml_type::q8_0) {
        type = ggml_type::q6_k;
      }
    } else if (cat == Category::attn_v) {
      if ((q4_k_m || q5_k_m) && use_more_bits(i_attention_wv, n_attention_wv)) {
        type = ggml_type::q6_k;
      } else if (q4_k_s && i_attention_wv < 4) {
        type = ggml_type::q5_k;
      }
      if (is_70b && type == ggml_type::q4_k) type = ggml_type::q5_k;
      if (model.n_expert == 8) type = ggml_type::q8_0;
      ++i_attention_wv;
    } else if (cat == Category::attn_k) {
      if (model.n_expert == 8) type = ggml_type::q8_0;
    } else if (cat == Category::ffn_down) {
      const int i_layer = model.n_expert > 1 ? layer_of(t.name, i_ffn_down) : i_ffn_down;
      if (q4_k_m) {
        if (falcon) {
          type = i_layer < n_layer / 16            ? ggml_type::q6_k
                 : use_more_bits(i_layer, n_layer) ? ggml_type::q5_k
                                                   : ggml_type::q4_k;
        } else if (use_more_bits(i_layer, n_layer)) {
          type = ggml_type::q6_k;
        }
      } else if (q5_k_m && use_more_bits(i_layer, n_layer)) {
        type = ggml_type::q6_k;
      } else if (q4_k_s && !falcon && i_layer < n_layer / 8) {
        type = ggml_type::q5_k;
      }
      ++i_ffn_down;
    } else if (cat == Category::attn_output) {
      if (!falcon && model.n_expert == 8 && (q4_k_m || q4_k_s)) type = ggml_type::q5_k;
    }
    out.push_back(fallback(type, t.shape[0]));
  }
  return out;
}

}  // namespace kvprof::model
