// bench_accuracy: runs the vLLM profile on every recorded vLLM startup and prints per-figure
// error (median, p90, max) and the worst records. Usage: bench_accuracy [records.jsonl] [-v]
#include <fmt/format.h>

#include <cstring>

#include "kvprof/analysis/vllm_accuracy.hpp"

int main(int argc, char** argv) {
  std::string path = KVPROF_SOURCE_DIR "/tests/fixtures/vllm_startup_public.jsonl";
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-v") == 0) {
      verbose = true;
    } else {
      path = argv[i];
    }
  }
  auto results = kvprof::analysis::run_vllm_accuracy(path);
  if (!results) {
    fmt::print(stderr, "bench_accuracy: {}\n", results.error().message);
    return 1;
  }
  size_t failed = 0;
  for (const auto& r : *results) {
    if (!r.error.empty()) {
      ++failed;
      fmt::print("{} {}: FAILED: {}\n", r.id, r.model, r.error);
      continue;
    }
    if (!verbose) continue;
    fmt::print("{} {}\n", r.id, r.model);
    for (const auto& f : r.figures) {
      fmt::print("    {:<22} actual {:>12.2f}  kvprof {:>12.2f}  error {:6.2f}%\n", f.figure,
                 f.actual, f.predicted, f.error_pct());
    }
  }
  fmt::print("\n{} records ({} failed) from {}\n", results->size(), failed, path);
  fmt::print("{:<22} {:>4} {:>9} {:>9} {:>9}  worst\n", "figure", "n", "median%", "p90%", "max%");
  for (const auto& s : kvprof::analysis::summarize(*results)) {
    fmt::print("{:<22} {:>4} {:>9.2f} {:>9.2f} {:>9.2f}  {}\n", s.figure, s.n, s.median_pct,
               s.p90_pct, s.max_pct, s.worst_record);
  }
  return failed == 0 ? 0 : 1;
}
