// Test-only: the run folders under a results folder (its files, such as the history database
// kvprof_history.sqlite, left out).
#pragma once

#include <algorithm>
#include <filesystem>
#include <vector>

namespace kvprof::test {

// The run folders directly under `results` (not the hidden ones, such as the default engine's
// .models/), sorted; empty when it does not exist.
inline std::vector<std::filesystem::path> run_folders(const std::filesystem::path& results) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(results, ec)) {
    if (e.is_directory() && !e.path().filename().string().starts_with(".")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The first run folder under `results`, or an empty path.
inline std::filesystem::path first_run_folder(const std::filesystem::path& results) {
  const auto all = run_folders(results);
  return all.empty() ? std::filesystem::path() : all.front();
}

}  // namespace kvprof::test
