// PLACEHOLDER: replaced by the env command (OS, CPU, RAM, NVML GPUs, engines on PATH).
#include "kvprof/cli/commands.hpp"
namespace kvprof::cli {
void register_env_command(CLI::App& app) { app.add_subcommand("env", "Show this machine"); }
}  // namespace kvprof::cli
