// A model's architecture as a user states it (`--num-layers 32 --hidden-size 4096 ...`, or a sweep
// entry's num_layers, ...): checked against the model kvprof read, or, for a model kvprof cannot
// read, the description of a Llama-like dense model to plan.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::model {

struct ArchitectureHints {
  std::optional<double> params;  // parameter count (6.7e9)
  std::optional<uint32_t> n_layer, n_head, n_head_kv, head_dim, hidden_size, intermediate_size,
      vocab_size;

  // True when any hint is given.
  [[nodiscard]] bool any() const;
  // True when layers, hidden size and heads are given: enough to describe a model.
  [[nodiscard]] bool describes_a_model() const;
};

// One note per hint that differs from `spec` ("num_layers 40 given, the model has 32 (the
// model's is used)"); none when every hint agrees.
std::vector<std::string> check_hints(const ModelSpec& spec, const ArchitectureHints& hints);

// A Llama-like dense model `id` from `hints` (describes_a_model() must hold), `max_len` tokens of
// context, weights in `torch_dtype`; the intermediate size from the parameter count when not
// given. Notes say what was guessed. An input error when the hints do not make a model.
Expected<ModelSpec> model_from_hints(const std::string& id, const ArchitectureHints& hints,
                                     uint64_t max_len, const std::string& torch_dtype,
                                     std::vector<std::string>& notes);

}  // namespace kvprof::model
