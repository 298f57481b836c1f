// Test-only: what an estimate says the engine will log (Estimate::engine_report.log_lines).
#pragma once

#include <string>

#include "kvprof/estimate/result.hpp"

namespace kvprof::test {

// True when a planned line holds `part`.
inline bool has_planned_line(const estimate::Estimate& e, const std::string& part) {
  for (const auto& l : e.engine_report.log_lines) {
    if (l.find(part) != std::string::npos) return true;
  }
  return false;
}

// The MiB of the planned line naming `what` ("CUDA0 compute buffer size = 898.25 MiB"); -1
// when no line names it.
inline double planned_mib(const estimate::Estimate& e, const std::string& what) {
  for (const auto& l : e.engine_report.log_lines) {
    const size_t at = l.find(what + " =");
    if (at != std::string::npos) return std::stod(l.substr(at + what.size() + 2));
  }
  return -1;
}

}  // namespace kvprof::test
