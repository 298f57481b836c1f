// A bench run against a plan, in the layout of profile's `estimate_comparison` (so reports and
// `kvprof compare` read both alike): the plan for `--estimate-with`'s llama.cpp flags, or for the
// run's own settings, per component against llama.cpp's reported buffers and the process's
// growth, what the plan assumed, and the likely cause of each component off by more than 10%
// (the settings where the flags and the run differ first).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvprof/bench/bench_config.hpp"
#include "kvprof/bench/bench_run.hpp"

namespace kvprof::bench {

// {estimate_flags, rows, nature, assumptions, likely_causes} for the largest condition that
// started; null when none started or the model cannot be planned (a line in `warnings` says
// why when --estimate-with was given).
nlohmann::json estimate_comparison_json(const BenchConfig& config, const BenchReport& report,
                                        std::vector<std::string>& warnings);

// The terminal lines of a comparison: its table, what the plan assumed and the likely causes;
// empty for null.
std::string estimate_comparison_text(const nlohmann::json& comparison);

}  // namespace kvprof::bench
