// The run directory of a profile: its id, its creation, and manifest.json (full configuration,
// kvprof version, host, GPUs and driver, the server as it describes itself).
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "kvprof/util/error.hpp"

namespace kvprof::profile {

struct ProfileConfig;
struct ProfileReport;

// Creates `output_dir`/`run_id` (parents too); when it exists, "_2", "_3", ... is appended to
// `run_id` (updated). An io error naming the directory when it cannot be created.
Expected<std::filesystem::path> create_run_dir(const std::filesystem::path& output_dir,
                                               std::string& run_id);

// Writes `value` to `path` (pretty, via a temporary file renamed into place); an io error.
Expected<void> write_json_file(const std::filesystem::path& path, const nlohmann::json& value);

// manifest.json for `report` run under `config`, with `status` "running", "completed",
// "interrupted" or "failed". The API key is never included.
nlohmann::json manifest_json(const ProfileConfig& config, const ProfileReport& report,
                             const std::string& status, const std::string& driver_version,
                             const std::string& cuda_version);

}  // namespace kvprof::profile
