// The SGLang releases the planner models, each as the rule that picks the default
// mem_fraction_static, chunked_prefill_size and cuda_graph_max_bs from the GPU's memory and the
// parallel sizes (python/sglang/srt/server_args.py of each release; sources in
// docs/architecture.md, "SGLang versions"). The KV pool rule itself is the same in every release:
// free memory before the weights x mem_fraction_static - weights (model_runner.py
// profile_max_num_token).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kvprof/util/error.hpp"

namespace kvprof::engines {

enum class SglangFractionRule : uint8_t {
  tp_table,         // a fraction per TP size (0.88 at TP 1 ... 0.79 at TP 16)
  tp_table_large,   // the table up to 80 GiB; larger GPUs reserve 18 GiB, B200s take 0.79
  reserve_tiers,    // a fixed reserve per GPU memory tier (9.5 + TPxPP/2 GiB on 80 GB cards)
  reserve_formula,  // 512 MiB + 1.5 MiB per chunked-prefill token + 2 MiB per graph batch size
};

struct SglangVersionRules {
  std::string_view name;      // "v0.5.3": what outputs name as the modelled version
  std::string_view releases;  // "v0.5.3 and later"
  SglangFractionRule fraction_rule = SglangFractionRule::reserve_formula;
  double tp8_fraction = 0.81;          // tp_table: TP 8-15 (0.83 before v0.4)
  bool table_by_tp_times_pp = false;   // tp_table_large: the table reads TP x PP
  bool vlm_adjust = false;             // a vision tower lowers the fraction (v0.4.9.post3+)
  bool chunk_4096_below_60gib = true;  // reserve_formula's 4096-token tier
  std::string_view checked;            // how far the rules were checked against startups
};

// What a release fills in when the flags leave it to the engine.
struct SglangDefaults {
  double mem_fraction_static = 0.88;
  uint32_t chunked_prefill_size = 8192;
  uint32_t cuda_graph_max_bs = 160;
};

struct SglangDefaultsInput {
  uint64_t gpu_memory_mib = 0;  // what SGLang reads (nvidia-smi memory.total)
  uint32_t tp = 1;
  uint32_t pp = 1;
  bool speculative = false;                      // a draft model (EAGLE-style)
  std::optional<uint32_t> chunked_prefill_size;  // --chunked-prefill-size
  std::optional<uint32_t> cuda_graph_max_bs;     // --cuda-graph-max-bs
  uint32_t vision_layers = 0;                    // 0: no vision tower
  uint32_t vision_hidden_size = 0;
};

// The defaults release `r` picks for a deployment (given flags are kept as given).
SglangDefaults sglang_defaults(const SglangVersionRules& r, const SglangDefaultsInput& in);

// Every modelled release, oldest first; the last is the newest ("latest").
std::span<const SglangVersionRules> sglang_versions();

// The newest modelled release.
const SglangVersionRules& sglang_latest_version();

// The rules for "0.4.7.post1", "v0.5.6", "latest" or "" (= latest). A usage error naming the
// supported releases for anything else.
Expected<const SglangVersionRules*> parse_sglang_version(std::string_view text);

// "v0.3 (v0.2.x - v0.3.x), ...; latest = v0.5.3": for help and error messages.
std::string sglang_supported_versions();

}  // namespace kvprof::engines
