// Result output for the CLI: JSON or text, to stdout or a file.
#include "kvprof/cli/output.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kvprof/util/error.hpp"
#include "kvprof/util/json_text.hpp"

namespace kvprof::cli {

void add_output_options(CLI::App* cmd, OutputOptions& options) {
  cmd->add_flag("--json", options.json, "Print machine-readable JSON instead of a table");
  cmd->add_option("-o,--output", options.output_path, "Write the result to FILE instead of stdout")
      ->type_name("FILE");
}

void emit(const OutputOptions& options, const nlohmann::json& json, const std::string& text) {
  const std::string body = options.json ? json_text(json, 2) + "\n" : text;
  if (options.output_path.empty() || options.output_path == "-") {
    std::fwrite(body.data(), 1, body.size(), stdout);
    std::fflush(stdout);
    return;
  }
  const std::filesystem::path target(options.output_path);
  const std::filesystem::path tmp = target.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw Fatal({ErrorKind::io, fmt::format("cannot write '{}': {}", options.output_path,
                                              std::strerror(errno))});
    }
    out.write(body.data(), static_cast<std::streamsize>(body.size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      throw Fatal({ErrorKind::io, fmt::format("cannot write '{}': {}", options.output_path,
                                              std::strerror(errno))});
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, target, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Fatal(
        {ErrorKind::io, fmt::format("cannot write '{}': {}", options.output_path, ec.message())});
  }
}

}  // namespace kvprof::cli
