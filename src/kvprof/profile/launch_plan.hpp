// The plan of the server a --launch command starts, read from the command itself: the engine
// and its own flags (engines::read_launch_command), the model file or folder it names, and the
// GPU the memory source sees (llama.cpp without one: the CPU). `profile --launch` and
// `find-max --launch` compare with it when no --estimate-with is given, as `bench` does.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/estimate/estimate.hpp"
#include "kvprof/gpu/memory_source.hpp"
#include "kvprof/profile/summary.hpp"
#include "kvprof/util/error.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::profile {

struct LaunchPlan {
  estimate::Estimate estimate;
  std::string flags;               // where it came from: "the launch command (llama-server ...)"
  nlohmann::json assumptions;      // estimate_assumptions of the plan
  std::vector<std::string> notes;  // what the command left to the engine's defaults
};

// The plan of `command` (placeholders filled) for the contexts (input + output) and
// concurrencies of `grid`, when kvprof can make one: an engine's server, its model a local file
// or folder kvprof reads, a GPU `memory` names that the catalog has (or llama.cpp on the CPU).
// A not_found error saying why not otherwise ("the launch names no local model file").
// `engine_version`: the server's release when known (a llama.cpp build from its /props or log);
// otherwise a llama-server is asked with `--version` (5 s), and other engines are planned at
// the release --engine-version defaults to.
Expected<LaunchPlan> plan_from_launch(std::string_view command, const workload::GridOptions& grid,
                                      gpu::MemorySource* memory, unsigned gpu_index,
                                      std::string_view engine_version = {});

// The plan of a llama.cpp server at an endpoint from what its /props states: the model file
// (model_path, when this host can read it), the slots and each slot's context, its release
// (build_info: llama-server's build, or kvprof serve's libllama). A cache the slots
// share (-kvu) and split slots answer alike; kvprof serve's own figures (its cells, its KV
// buffer) tell them apart, and without them the plan is of split slots (the larger cache), said
// in a note with what a shared one would hold. not_found saying why there is no plan otherwise.
Expected<LaunchPlan> plan_from_props(const PropsFacts& props, const workload::GridOptions& grid,
                                     gpu::MemorySource* memory, unsigned gpu_index);

}  // namespace kvprof::profile
