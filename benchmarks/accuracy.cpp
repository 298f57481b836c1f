// bench_accuracy: runs the engine profiles on recorded engine startups and prints per-figure
// error (median, p90, max) and the worst records, one table per file. Without a file it runs
// every release's public startups: tests/fixtures/vllm_startup_public.jsonl (vLLM v0.19) and
// tests/fixtures/{vllm,sglang,trtllm,tgi}_versions/*.jsonl (one file per modelled release).
// Usage: bench_accuracy [records.jsonl ...] [-v]
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kvprof/analysis/startup_accuracy.hpp"

namespace {

std::vector<std::string> default_files() {
  const std::filesystem::path fixtures = KVPROF_SOURCE_DIR "/tests/fixtures";
  std::vector<std::string> out{(fixtures / "vllm_startup_public.jsonl").string()};
  for (const char* dir : {"vllm_versions", "sglang_versions", "trtllm_versions", "tgi_versions"}) {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(fixtures / dir)) {
      if (e.path().extension() == ".jsonl") files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    out.insert(out.end(), files.begin(), files.end());
  }
  return out;
}

// Prints one file's table; returns the number of records that could not be planned.
size_t report(const std::string& path, bool verbose) {
  auto results = kvprof::analysis::run_startup_accuracy(path);
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
  const std::string name = std::filesystem::path(path).parent_path().filename().string() + "/" +
                           std::filesystem::path(path).filename().string();
  fmt::print("\n{}: {} records ({} failed)\n", name, results->size(), failed);
  fmt::print("{:<22} {:>4} {:>9} {:>9} {:>9}  worst\n", "figure", "n", "median%", "p90%", "max%");
  for (const auto& s : kvprof::analysis::summarize(*results)) {
    fmt::print("{:<22} {:>4} {:>9.2f} {:>9.2f} {:>9.2f}  {}\n", s.figure, s.n, s.median_pct,
               s.p90_pct, s.max_pct, s.worst_record);
  }
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-v") == 0) {
      verbose = true;
    } else {
      files.emplace_back(argv[i]);
    }
  }
  if (files.empty()) files = default_files();
  size_t failed = 0;
  for (const auto& f : files)
    failed += report(f, verbose);
  return failed == 0 ? 0 : 1;
}
