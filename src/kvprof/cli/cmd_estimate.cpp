// PLACEHOLDER: replaced by the estimate command.
#include "kvprof/cli/commands.hpp"
namespace kvprof::cli {
void register_estimate_command(CLI::App& app) { app.add_subcommand("estimate", "Predict memory"); }
}  // namespace kvprof::cli
