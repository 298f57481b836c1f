// llama.cpp's tensor placement overrides: -ot/--override-tensor PATTERN=BUFT (several, comma-
// separated, each flag adding to the list), --cpu-moe and --n-cpu-moe N, in the order given. As
// llama.cpp loads a model, each tensor goes to the buffer type of the first override whose
// regular expression it contains (std::regex_search on its GGUF name); the rest follow -ngl.
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/estimate/settings.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::engines {

// The expert tensors of a MoE layer, as --cpu-moe names them (common/arg.cpp).
inline constexpr const char* k_expert_tensors_regex = "\\.ffn_(up|down|gate)_exps";

// One -ot value ("blk\.1[0-9]\.ffn_.*_exps=CPU,token_embd=CUDA0"): each part split at its first
// '='. A usage error for a part without '=', an empty pattern, a pattern that is not a regular
// expression (at most 1024 bytes), or a buffer type other than CPU or CUDA<n>; at most 64 KiB
// and 1024 parts.
Expected<std::vector<estimate::TensorOverride>> parse_override_tensor(std::string_view value);

// --cpu-moe: every layer's experts on the host.
estimate::TensorOverride cpu_moe_override();

// --n-cpu-moe N: the experts of the first N layers on the host (N at most 4096).
Expected<std::vector<estimate::TensorOverride>> n_cpu_moe_overrides(uint32_t n_layers);

// -dev/--device LIST ("CUDA0,CUDA1", "none"): the GPUs llama.cpp offloads to, by the names its
// CUDA build gives them; empty for "none" (everything on the host). A usage error for another
// name, a repeated one, or more than 256.
Expected<std::vector<std::string>> parse_device_list(std::string_view value);

// A text every match of the regular expression `pattern` (ECMAScript, as llama.cpp's std::regex
// reads -ot) contains: its leading literal ("blk.17.ffn_" of "blk\\.17\\.ffn_(up|down)_exps"),
// empty when none is known (a top-level alternation, a leading class or quantifier).
std::string regex_required_literal(std::string_view pattern);

// The overrides compiled once for placing a model's tensors.
class TensorPlacement {
 public:
  explicit TensorPlacement(const std::vector<estimate::TensorOverride>& overrides);
  // The buffer type of the first override `tensor_name` matches: -1 for the host (CPU), k for
  // CUDA<k>; nullopt when none matches (the tensor follows -ngl).
  [[nodiscard]] std::optional<int32_t> device_of(std::string_view tensor_name) const;
  [[nodiscard]] bool empty() const { return m_rules.empty(); }

 private:
  struct Rule {
    std::string literal;  // regex_required_literal: a name without it cannot match
    std::regex pattern;
    int32_t device = -1;
  };
  std::vector<Rule> m_rules;
};

}  // namespace kvprof::engines
