// What a server command says about the deployment it starts, as each engine reads its own flags:
// the engine, the model and the settings the plan needs. Each engine's reader lives in its folder
// (engines/<name>/launch.cpp); the front door that splits the command and picks the reader is
// engines::read_launch_command (registry.hpp).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "kvprof/estimate/settings.hpp"

namespace kvprof::estimate {

struct LaunchReading {
  std::string program;             // as the command names it: "llama-server", "vllm serve"
  std::string model;               // -m / --model / the positional model; "" when not given
  EngineSettings settings;         // the engine, and each setting the command states
  std::vector<std::string> notes;  // defaults the command left to the engine, flags not read
  std::set<std::string> given;     // the settings it states, by kvprof estimate's long flag
                                   // names ("max-model-len", "parallel"), as --estimate-with
};

}  // namespace kvprof::estimate
