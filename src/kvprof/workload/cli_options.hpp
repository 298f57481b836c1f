// Command-line options of the workload grid, shared by `kvprof workload` and `kvprof profile`:
// declared once here, each with its environment variable.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "kvprof/util/error.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::workload {

// What the user typed; resolve() turns it into GridOptions.
struct GridCliValues {
  std::vector<std::string> input_lens{"8192", "16384", "32768"};
  std::vector<std::string> output_lens{"64", "128"};
  std::vector<std::string> concurrencies{"8", "16", "32", "64"};
  std::vector<std::string> prefix_modes{"low", "high"};
  uint32_t n_per_condition = 1;
  std::string count_mode = "times-concurrency";
  uint64_t seed = 0;
  double request_rate = 0.0;
  std::string prompt_format = "tokens";
  double prefix_fraction = 0.9;
};

// Adds --input-lens, --output-lens, --concurrencies, --prefix-modes, --n-per-condition,
// --count-mode, --seed, --request-rate, --prompt-format, --prefix-fraction to `cmd` (env:
// KVPROF_INPUT_LENS, KVPROF_OUTPUT_LENS, KVPROF_CONCURRENCIES, KVPROF_PREFIX_MODES,
// KVPROF_N_PER_CONDITION, KVPROF_SEED, KVPROF_REQUEST_RATE).
void add_grid_options(CLI::App* cmd, GridCliValues& values);

// The grid the values describe ("8k" counts allowed); a usage error naming a bad value.
Expected<GridOptions> resolve(const GridCliValues& values);

}  // namespace kvprof::workload
