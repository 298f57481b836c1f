// --json / --output handling shared by every command that produces results.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace kvprof::cli {

struct OutputOptions {
  bool json = false;        // print JSON instead of the readable text
  std::string output_path;  // write there instead of stdout ("-" = stdout)
};

// Adds --json and --output/-o to `cmd`, bound to `options`.
void add_output_options(CLI::App* cmd, OutputOptions& options);

// Writes `json` (pretty) when options.json, else `text`, to the chosen destination; a file is
// written to a temporary name and renamed, so a failure never leaves half a file. Throws Fatal
// (io) when the file cannot be written.
void emit(const OutputOptions& options, const nlohmann::json& json, const std::string& text);

}  // namespace kvprof::cli
