// Top-level command line: subcommands, exit codes, the one place Fatal is caught.
#include "kvprof/cli/cli.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "kvprof/cli/commands.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::cli {

int run(int argc, char** argv) {
  CLI::App app{
      "kvprof: plan and measure the GPU memory of LLM serving deployments.\n"
      "  estimate   predict weights, KV cache, activations, CUDA graphs per GPU\n"
      "  models     list the built-in model catalog\n"
      "  gpus       list the built-in GPU catalog\n"
      "  env        show this machine: OS, CPU, RAM, GPUs (NVML), inference engines",
      "kvprof"};
  app.set_version_flag("--version", std::string("kvprof ") + KVPROF_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);

  register_estimate_command(app);
  register_models_command(app);
  register_gpus_command(app);
  register_env_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  } catch (const Fatal& e) {
    std::fprintf(stderr, "kvprof: error: %s\n", e.error().message.c_str());
    return exit_code_for(e.error().kind);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvprof: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace kvprof::cli
