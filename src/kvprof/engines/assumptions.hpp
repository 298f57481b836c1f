// What a plan assumed: its GPU and where that came from (given, detected, simulated or assumed),
// the engine and the engine version whose rules kvprof follows, and each setting with its origin
// (given, or the default filled in). Echoed by `estimate --json` and `profile --estimate-with`.
#pragma once

#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "kvprof/engines/registry.hpp"
#include "kvprof/estimate/result.hpp"

namespace kvprof::engines {

// Where the plan's GPU came from.
enum class GpuOrigin { given, detected, simulated, assumed };
std::string_view gpu_origin_name(GpuOrigin origin);  // "given", "detected", ...

struct AssumptionSources {
  GpuOrigin gpu_origin = GpuOrigin::assumed;
  std::string gpu_note;         // why, e.g. "no GPU found"; may be empty
  std::set<std::string> given;  // long names of the flags given ("gpu-memory-utilization")
};

// The settings the plan used, each {"value", "origin"} ("given" or "default"), its GPU with
// origin and memory, the engine and the engine version kvprof models.
nlohmann::json estimate_assumptions(const estimate::Estimate& est, const AssumptionSources& src);

// One line: "estimate assumed: GPU ... (assumed: no GPU found); vllm as kvprof models v0.19; ...".
std::string assumptions_text(const nlohmann::json& assumptions);

}  // namespace kvprof::engines
