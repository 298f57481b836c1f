// The table both find-max benchmarks print: the adaptive search from each start, then the grid
// over the range it replaces, each row with its steps, answer and wall time.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvprof/experiment/find_max.hpp"

namespace kvprof::benchmarks {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Prints the table: one row per (label, start) search with `trial`, then the grid over
// 1..`max_c` in steps of `grid_step` labelled `grid_label`. False (the error printed) when a
// trial fails.
inline bool print_find_max_table(
    experiment::FindMaxLimits limits, const experiment::Trial& trial,
    const std::vector<std::pair<std::string, std::optional<uint32_t>>>& searches, uint32_t max_c,
    uint32_t grid_step, const std::string& grid_label) {
  fmt::print("| search | steps | answer | wall s | s per step |\n|---|---:|---:|---:|---:|\n");
  for (const auto& [label, start] : searches) {
    limits.start = start;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = experiment::find_max(limits, trial, nullptr, nullptr);
    const double wall = seconds_since(t0);
    if (!r) {
      fmt::print(stderr, "{}\n", r.error().message);
      return false;
    }
    fmt::print("| {} | {} | {} | {:.1f} | {:.2f} |\n", label, r->steps.size(),
               r->answer ? *r->answer : 0, wall, wall / static_cast<double>(r->steps.size()));
  }
  const auto t0 = std::chrono::steady_clock::now();
  uint32_t steps = 0, answer = 0;
  for (uint32_t c = 1; c <= max_c; c += grid_step) {
    auto o = trial(c, ++steps);
    if (!o) {
      fmt::print(stderr, "{}\n", o.error().message);
      return false;
    }
    if (experiment::judge_trial(*o, limits).pass) answer = std::max(answer, c);
  }
  const double wall = seconds_since(t0);
  fmt::print("| {} | {} | {} | {:.1f} | {:.2f} |\n", grid_label, steps, answer, wall, wall / steps);
  return true;
}

}  // namespace kvprof::benchmarks
