// The command-line interface: parses argv, runs one subcommand, maps errors to exit codes
// (0 ok, 1 runtime failure, 2 bad usage, 130 interrupted).
#pragma once

namespace kvprof::cli {

// Runs kvprof with the given arguments; returns the process exit code. Never throws.
int run(int argc, char** argv);

}  // namespace kvprof::cli
