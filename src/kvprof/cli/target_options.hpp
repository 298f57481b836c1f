// The flags that name the server a measuring command (profile, find-max) drives — --launch and
// its --launch-* settings, --container — and the run::TargetSpec they make with --endpoint and
// the simulator.
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
  std::string container;  // --container: a running container's name or id; empty = none
};

// Adds --container NAME to `cmd`: the server in that running container, found through docker or
// podman (the port it publishes for the engine's), measured as --endpoint would be.
void add_container_option(CLI::App* cmd, LaunchCliValues& values);

// With --container: checks it is the only server named, asks the container runtime where the
// container's engine listens, sets `endpoint` to that URL and says so on stderr (a fatal error,
// one line, when the runtime cannot tell). Without: nothing.
void resolve_container(const LaunchCliValues& values, std::string& endpoint);

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
