// "Did you mean": the flag of a command closest to one it does not know.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace kvprof::cli {

// The flag of `cmd` (long or short form, as typed: "--max-model-len") closest to `unknown`
// ("--max-modle-len", "--max-model-len=8k" compares its name only); nullopt when none is close
// (an edit distance over a third of the name, or over 4).
std::optional<std::string> closest_flag(const CLI::App& cmd, std::string_view unknown);

// The innermost subcommand of `app` that was selected on the command line (`app` when none).
const CLI::App& selected_command(const CLI::App& app);

// One line for arguments `cmd` did not expect: each unknown flag with its closest match.
std::string unexpected_arguments_text(const CLI::App& cmd);

}  // namespace kvprof::cli
