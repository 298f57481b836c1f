// The flags that name the server a measuring command (profile, find-max) drives — --launch and
// its --launch-* settings — and the run::TargetSpec they make with --endpoint and the simulator.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "kvprof/run/target.hpp"

namespace kvprof::cli {

struct LaunchCliValues {
  std::string command;  // --launch: empty = none
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: a free one
  double timeout_s = 600;
  double grace_s = 15;
};

// Adds --launch (described by `launch_help`), --launch-host, --launch-port, --launch-timeout and
// --launch-grace to `cmd`, in a group "launch a server".
void add_launch_options(CLI::App* cmd, LaunchCliValues& values, const std::string& launch_help);

// The target the flags name: the simulator when `simulate`, else the server --launch starts
// (listening at `endpoint` when one is given), else the server at `endpoint`. `model` and
// `max_concurrency` fill {model} and {max_concurrency}; the simulator's and the memory's
// settings are the caller's.
run::TargetSpec target_spec(const LaunchCliValues& launch, const std::string& endpoint,
                            const std::string& model, uint32_t max_concurrency, bool simulate);

}  // namespace kvprof::cli
