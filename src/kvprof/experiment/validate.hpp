// `kvprof validate`: a run's measured memory (sampled, and as the engine reported it) against
// kvprof's estimate for the same settings — or another calculator's figures given by hand — per
// component, with the error in %, the accuracy a breakdown of that component can be expected to
// have (weights +-2%, KV cache +-15%, activations +-30%, overhead +-40%, total +-10%), and a
// one-line diagnosis of the largest gap.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/results/run_summary.hpp"

namespace kvprof::experiment {

// The expected-accuracy band of a component's breakdown, +-percent, and the match range.
struct AccuracyBand {
  double pct = 0;
  std::string expected_match;  // e.g. "95-100%"
};
AccuracyBand accuracy_band(const std::string& component);

struct ValidationRow {
  std::string component;
  std::optional<double> sampled_bytes;  // the measured breakdown
  std::string sampled_confidence;
  std::optional<double> reported_bytes;   // by the engine
  std::optional<double> reference_bytes;  // the estimate or the calculator
  std::optional<double> error_pct;        // (reference - measured) / measured x 100
  std::string error_against;              // "sampled" or "reported by engine"
  AccuracyBand band;
  std::optional<bool> within_band;
};

struct Validation {
  results::RunSummary run;
  std::string reference;  // "kvprof estimate (FLAGS)", "calculator figures"
  std::vector<ValidationRow> rows;
  std::string largest_gap;  // the component, empty when no row has an error
  std::string diagnosis;    // one line
};

// Validates `run` against `reference_bytes` (per component of results::k_components; missing ones
// are left out); the error is against the sampled figure, or the engine's where nothing was
// sampled.
Validation validate_run(const results::RunSummary& run,
                        const std::map<std::string, double>& reference_bytes,
                        std::string reference);

nlohmann::json validation_json(const Validation& v);
std::string validation_text(const Validation& v);

}  // namespace kvprof::experiment
