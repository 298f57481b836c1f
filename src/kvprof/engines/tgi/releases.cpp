// TGI's release rows (see releases.hpp). Each row's facts, from the tags of
// github.com/huggingface/text-generation-inference:
//  - wiggle room: none before v1.4.1; 0.95 hard-coded in warmup v1.4.1 - v2.2.0; TGI_WIGGLE_ROOM
//    "0.95" v2.3, "0.90" v2.4, "0.95" v3.0, "0.93" v3.1 - v3.2, "0.90" v3.3 (globals.py); from
//    v3.0 it multiplies the fraction (get_free_memory(device, MEMORY_FRACTION * TGI_WIGGLE_ROOM))
//    instead of the free memory;
//  - block size: paged attention's 16 until v2.2; flashinfer's 1 by default from v2.3
//    (launcher resolve_attention; globals.py BLOCK_SIZE);
//  - the launcher's defaults: clap's 1024/2048/4096 in v1.x; from config.json capped at 4096 in
//    v2.0 - v2.4.0; only the prefill in v2.4.1; the prefill from the card's flops in v3;
//  - the router's warmup batch: requests of max_input_tokens until the prefill is full, each
//    holding max_total_tokens (v1.2+; two new tokens each before), asking for prompt logprobs
//    until v3.0 turned REQUEST_LOGPROBS off.
#include "kvprof/engines/tgi/releases.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>

#include "kvprof/util/strings.hpp"

namespace kvprof::engines {
namespace {

using R = TgiDefaultsRule;

constexpr std::array<TgiReleaseRules, 10> k_tgi_releases{{
    {"v1.0", "v1.0.0 - v1.1.1", 1, 0, 0, 1.0, false, 16, R::fixed, false, true, false},
    {"v1.2", "v1.2.0 - v1.4.0", 1, 2, 0, 1.0, false, 16, R::fixed, true, true, false},
    {"v1.4.1", "v1.4.1 - v1.4.5", 1, 4, 1, 0.95, false, 16, R::fixed, true, true, false},
    {"v2.0", "v2.0.0 - v2.2.0", 2, 0, 0, 0.95, false, 16, R::from_config, true, true, false},
    {"v2.3", "v2.3.0 - v2.3.1", 2, 3, 0, 0.95, false, 1, R::from_config, true, true, false},
    {"v2.4.0", "v2.4.0", 2, 4, 0, 0.90, false, 1, R::from_config, true, true, true},
    {"v2.4.1", "v2.4.1", 2, 4, 1, 0.90, false, 1, R::prefill_only, true, true, true},
    {"v3.0", "v3.0.0 - v3.0.2", 3, 0, 0, 0.95, true, 1, R::prefill_by_compute, true, false, true},
    {"v3.1", "v3.1.0 - v3.2.3", 3, 1, 0, 0.93, true, 1, R::prefill_by_compute, true, false, true},
    {"v3.3", "v3.3.0 - v3.3.7", 3, 3, 0, 0.90, true, 1, R::prefill_by_compute, true, false, true},
}};

// "3.3.5" -> {3, 3, 5}; false when it is not such a version ("3.3.5-rocm" is).
bool split_tgi_version(std::string_view v, std::array<uint32_t, 3>& out) {
  const auto rest = read_version_numbers(v, out);
  return rest && (rest->empty() || rest->starts_with("-"));
}

// The launcher's fp16 flops per card (launcher/src/main.rs ComputeType::f16_flop), by kvprof's
// GPU ids, and the first release that names the card; 0 = unknown to TGI ("Unkown compute").
double tgi_card_flops(const gpu::GpuSpec& g, const TgiReleaseRules& r) {
  const auto at_least = [&r](uint32_t minor, uint32_t patch) {
    return std::tie(r.first_minor, r.first_patch) >= std::tie(minor, patch);
  };
  const std::string_view id = g.id;
  if (id == "RTX-4090") return 82e12;
  if (id == "T4") return 65e12;
  if (id == "L4") return 121e12;
  if (id == "L40") return 181e12;
  if (id == "L40S") return 363e12;
  if (id == "A10G") return 125e12;
  if (id == "A40" && at_least(0, 2)) return 149e12;
  if (id.starts_with("A100")) return 312e12;
  if (id == "H100-SXM") return 900e12;
  if ((id == "H100-PCIE" || id == "H100-NVL") && at_least(0, 2)) return 900e12;
  if (id == "H200" && at_least(1, 0)) return 989e12;
  return 0;
}

}  // namespace

std::span<const TgiReleaseRules> tgi_releases() {
  return k_tgi_releases;
}

std::string tgi_supported_releases() {
  std::string out;
  for (const auto& r : k_tgi_releases) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} ({})", r.name, r.releases);
  }
  return out;
}

Expected<const TgiReleaseRules*> parse_tgi_release(std::string_view text) {
  const std::string t = to_lower(trim(text));
  const auto& rows = k_tgi_releases;
  if (t.empty() || t == "latest") return &rows.back();
  std::string_view v = t;
  if (v.front() == 'v') v.remove_prefix(1);
  std::array<uint32_t, 3> n{};
  if (!split_tgi_version(v, n) || n[0] < 1 || n[0] > 3) {
    return fail(ErrorKind::usage,
                fmt::format("--engine-version '{}' is not a modelled TGI release; supported: {}",
                            text, tgi_supported_releases()));
  }
  const TgiReleaseRules* found = &rows.front();
  for (const auto& r : rows) {
    if (std::tie(n[0], n[1], n[2]) >= std::tie(r.first_major, r.first_minor, r.first_patch))
      found = &r;
  }
  return found;
}

uint32_t tgi_v3_default_prefill_tokens(const TgiReleaseRules& rules, const model::ModelSpec& m,
                                       const gpu::GpuSpec& gpu, uint32_t num_shard,
                                       double cuda_memory_fraction) {
  const bool vlm = m.vision_layers > 0;
  uint64_t fallback = 4096;
  if (m.model_type == "qwen2_vl" || m.model_type == "qwen2_5_vl") fallback = 10000;
  if (m.model_type.starts_with("gemma3")) fallback = 8000;
  const double h = m.hidden_size;
  const double heads = m.n_head;
  const double kv = m.n_head_kv > 0 ? m.n_head_kv : m.n_head;
  const double d = m.head_dim > 0 ? m.head_dim : (m.n_head > 0 ? h / heads : 0);
  const double layers = m.n_layer;
  const double inter =
      m.is_moe() ? static_cast<double>(m.moe.expert_intermediate_size) : m.intermediate_size;
  const double experts_per_token =
      m.is_moe() ? std::max<uint32_t>(m.moe.n_expert_used, 1) + m.moe.n_shared_expert : 1;
  // Config::flop: q, k, v, the attention and o per layer, and the gated MLP of the experts a
  // token runs; the launcher gives VLMs none.
  uint64_t value = fallback;
  const double flops = tgi_card_flops(gpu, rules) * std::max<uint32_t>(num_shard, 1);
  const double per_token = layers * (2 * heads * d * h + 4 * kv * d * h + 2 * heads * d * h +
                                     2 * heads * d * h + 2 * 3 * h * inter * experts_per_token);
  if (!vlm && flops > 0 && per_token > 0) {
    const auto optimal = static_cast<uint64_t>(flops / per_token);
    if (optimal > 100) value = optimal;
  }
  if (m.max_position_embeddings > 0) value = std::min<uint64_t>(value, m.max_position_embeddings);
  // vram_maximum (unquantized checkpoints only): the launcher's own rough model and KV sizes.
  if (m.quant.method == model::QuantMethod::none) {
    const double experts = m.is_moe() ? m.moe.n_expert : 1;
    const double available = static_cast<float>(static_cast<double>(gpu.memory_bytes) *
                                                std::max<uint32_t>(num_shard, 1)) *
                             cuda_memory_fraction * 0.95;
    const double model_bytes =
        2 * (((heads + 2 * kv) * d + heads * d * h + 3 * inter * experts * h) * layers +
             2 * h * m.vocab_size);
    const double token_bytes = kv * 2 * d * 2 * layers + (inter + inter / 2) * experts * 2 * 3;
    if (available > model_bytes && token_bytes > 0) {
      value =
          std::min<uint64_t>(value, static_cast<uint64_t>((available - model_bytes) / token_bytes));
    }
  }
  return static_cast<uint32_t>(std::min<uint64_t>(value, UINT32_MAX));
}

}  // namespace kvprof::engines
