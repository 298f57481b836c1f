// What a plan assumed: its GPU and where that came from (given, detected, simulated or assumed),
// the engine and the engine version whose rules kvprof follows, and each setting with its origin
// (given, or the default filled in). Echoed by `estimate --json` and `profile --estimate-with`.
#pragma once

#include <optional>
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

// Where a plan runs, and why.
struct PlanDevice {
  std::string gpu;  // a catalog GPU's id, or "cpu" (llama.cpp in host RAM)
  GpuOrigin origin = GpuOrigin::assumed;
  std::string note;  // why, in words, for notes and assumptions; empty when given
};

// The device a plan of `settings` runs on: `given` (a catalog GPU or "cpu") when not empty;
// llama.cpp on the CPU when no catalog GPU is `found` (NVML's name of the first GPU) or no layer
// is offloaded (-ngl 0); the catalog GPU `found` names; else `fallback` (a catalog GPU) said to
// be assumed. A not_found error when none applies (an engine that needs a GPU, none found, no
// fallback).
Expected<PlanDevice> plan_device(const estimate::EngineSettings& settings, std::string_view given,
                                 const std::optional<std::string>& found,
                                 std::string_view fallback);

// The settings the plan used, each {"value", "origin"} ("given" or "default"), its GPU with
// origin and memory, the engine and the engine version kvprof models.
nlohmann::json estimate_assumptions(const estimate::Estimate& est, const AssumptionSources& src);

// One line: "estimate assumed: GPU ... (assumed: no GPU found); vllm as kvprof models v0.19; ...".
std::string assumptions_text(const nlohmann::json& assumptions);

}  // namespace kvprof::engines
