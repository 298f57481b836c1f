// The TGI (text-generation-inference) releases the planner models, each as the rules its warmup
// follows (server/text_generation_server/models/flash_causal_lm.py warmup, globals.py,
// launcher/src/main.rs and the router's warmup batch of each tag; sources in
// docs/engine-versions.md, "TGI"). The rule itself is the same in every release: after a
// prefill of --max-batch-prefill-tokens, the memory still free less a headroom becomes KV
// blocks, and their tokens are what the router logs as "Setting max batch total tokens to N".
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::engines {

// Where the launcher's defaults for the input, total and prefill tokens come from.
enum class TgiDefaultsRule : uint8_t {
  fixed,               // clap defaults: 1024 input, 2048 total, 4096 prefill (v1.x)
  from_config,         // min(max_position_embeddings, 4096): input - 1, total, prefill input + 50
  prefill_only,        // prefill min(4096, max_position_embeddings); the server picks the rest
  prefill_by_compute,  // prefill min(the card's flops / the model's, max positions, VRAM)
};

struct TgiReleaseRules {
  std::string_view name;      // "v3.3": what outputs name as the modelled release
  std::string_view releases;  // "v3.3.0 - v3.3.7"
  uint32_t first_major = 0, first_minor = 0, first_patch = 0;  // the first tag the row covers
  double wiggle_room = 1.0;             // TGI_WIGGLE_ROOM's default (1: none)
  bool wiggle_inside_fraction = false;  // v3: free - (1 - fraction x wiggle) x total
  uint32_t block_tokens = 16;           // BLOCK_SIZE of the default attention
  TgiDefaultsRule defaults = TgiDefaultsRule::fixed;
  bool warmup_reserves_total = true;    // each warmup request holds max_total_tokens (v1.2+)
  bool warmup_prefill_logprobs = true;  // the warmup asks for every prompt token's logprobs
  bool logs_kv_blocks = false;          // "KV-cache blocks: N, size: B" (v2.4.0+)
};

// Every modelled release, oldest first; the last is the newest.
std::span<const TgiReleaseRules> tgi_releases();

// The rules for "3.3.5", "v2.0.4", "latest" or "" (= the newest); a usage error naming the
// supported releases for anything else.
Expected<const TgiReleaseRules*> parse_tgi_release(std::string_view text);

// "v1.0 (v1.0.0 - v1.1.1), ...": for help and error messages.
std::string tgi_supported_releases();

// TGI v3's default --max-batch-prefill-tokens: the tokens the shards' fp16 flops serve per
// second (launcher compute_optimal; only for the cards its table names, nullopt else), capped by
// the model's positions and by what TGI estimates fits (vram_maximum), else 4096 (8000 for
// Gemma 3, 10000 for Qwen2-VL).
uint32_t tgi_v3_default_prefill_tokens(const TgiReleaseRules& rules, const model::ModelSpec& m,
                                       const gpu::GpuSpec& gpu, uint32_t num_shard,
                                       double cuda_memory_fraction);

}  // namespace kvprof::engines
