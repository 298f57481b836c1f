// What the planner is asked: model + GPU + engine settings + workload. engines::plan
// (engines/registry.hpp) answers it with an Estimate by the engine's own memory rules, built on
// the engine-neutral pieces of this folder (tensors, weights, KV layout, activations).
#pragma once

#include <optional>

#include "kvprof/estimate/result.hpp"
#include "kvprof/estimate/settings.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/model_spec.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::estimate {

struct EstimateInput {
  model::ModelSpec model;
  gpu::GpuSpec gpu;
  EngineSettings settings;
  Workload workload;
  std::optional<model::ModelSpec> draft;  // speculative decoding draft model
};

// A planner of `input`: engines::plan, which picks the engine's own rules (engines/registry.hpp).
using PlanFn = Expected<Estimate> (*)(const EstimateInput& input);

}  // namespace kvprof::estimate
