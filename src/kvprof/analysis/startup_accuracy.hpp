// Accuracy of the engine profiles against real startup logs: each record holds an engine's
// settings (vLLM, SGLang or TensorRT-LLM, its "engine" field) and the figures it printed; the
// estimator runs on the settings and the errors are compared.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::analysis {

// One figure of one record: what vLLM printed and what kvprof predicts.
struct FigureError {
  std::string figure;  // "weights_gib", "kv_cache_tokens", ...
  double actual = 0;
  double predicted = 0;
  [[nodiscard]] double error_pct() const;  // |predicted - actual| / actual * 100
};

struct RecordResult {
  std::string id;
  std::string model;
  std::string error;  // non-empty when the estimate could not run
  std::vector<FigureError> figures;
};

struct FigureSummary {
  std::string figure;
  size_t n = 0;
  double median_pct = 0;
  double p90_pct = 0;
  double max_pct = 0;
  std::string worst_record;
};

// Runs the record's engine profile on every record of a startup file (one JSON object a line,
// e.g. vllm_startup_public.jsonl), under the release a record names in
// "engine_version_modelled" (else the newest). A record whose "gpu_memory_utilization_given" is
// false leaves the fraction to the release's default rule and is checked on it
// ("memory_fraction"). Returns an io/input error when the file cannot be read or a line is not
// JSON.
Expected<std::vector<RecordResult>> run_startup_accuracy(const std::filesystem::path& jsonl);

// Median / p90 / max error per figure over `results` (records that failed are skipped).
std::vector<FigureSummary> summarize(const std::vector<RecordResult>& results);

// The summary of `figure`, if any record had it.
std::optional<FigureSummary> find_summary(const std::vector<FigureSummary>& s,
                                          std::string_view figure);

}  // namespace kvprof::analysis
