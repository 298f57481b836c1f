// The flags that name the server a measuring command drives (see target_options.hpp).
#include "kvprof/cli/target_options.hpp"

#include <fmt/format.h>

#include <cstdio>

#include "kvprof/run/container.hpp"

namespace kvprof::cli {

void add_launch_options(CLI::App* cmd, LaunchCliValues& values, const std::string& launch_help) {
  auto* group = cmd->add_option_group("launch a server");
  group->add_option("--launch", values.command, launch_help)->envname("KVPROF_LAUNCH");
  group->add_option("--launch-host", values.host, "Address {host} stands for")
      ->capture_default_str();
  group->add_option("--launch-port", values.port, "Port {port} stands for (default: a free one)");
  group
      ->add_option("--launch-timeout", values.timeout_s,
                   "Seconds to wait for /health or /v1/models to answer")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
  group
      ->add_option("--launch-grace", values.grace_s,
                   "Seconds between SIGTERM and SIGKILL when stopping it")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
}

void add_container_option(CLI::App* cmd, LaunchCliValues& values) {
  cmd->add_option("--container", values.container,
                  "Measure the server in this running container (name or id; the predecessors' "
                  "container_name): docker or podman, whichever is on PATH "
                  "($KVPROF_CONTAINER_RUNTIME to choose), tells the port it publishes for the "
                  "engine's port")
      ->type_name("NAME");
}

void resolve_container(const LaunchCliValues& values, std::string& endpoint) {
  if (values.container.empty()) return;
  if (!endpoint.empty() || !values.command.empty()) {
    throw Fatal({ErrorKind::usage,
                 "--container names the server already: give it, --endpoint "
                 "or --launch, one of them"});
  }
  const auto info = value_or_fatal(run::inspect_container(values.container));
  endpoint = info.endpoint();
  std::string engine = info.engine;
  if (!info.engine_version.empty()) engine += (engine.empty() ? "" : " ") + info.engine_version;
  fmt::print(stderr, "kvprof: container {} ({}{}): measuring {}\n", info.name, info.image,
             engine.empty() ? "" : ", " + engine, endpoint);
}

run::TargetSpec target_spec(const LaunchCliValues& launch, const std::string& endpoint,
                            const std::string& model, uint32_t max_concurrency, bool simulate) {
  run::TargetSpec spec;
  spec.kind = simulate                 ? run::TargetKind::simulator
              : launch.command.empty() ? run::TargetKind::endpoint
                                       : run::TargetKind::launch;
  spec.endpoint = endpoint;
  spec.launch.command_template = launch.command;
  spec.launch.host = launch.host;
  spec.launch.port = launch.port;
  spec.launch.ready_timeout_s = launch.timeout_s;
  spec.launch.grace_s = launch.grace_s;
  spec.launch.model = model;
  spec.launch.max_concurrency = max_concurrency;
  return spec;
}

}  // namespace kvprof::cli
