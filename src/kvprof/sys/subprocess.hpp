// Running another program with a deadline: posix_spawn in its own process group, stdout and
// stderr captured through pipes (bounded), the whole group killed when the deadline passes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::sys {

struct CommandOptions {
  std::chrono::milliseconds timeout{5000};
  // Variables set (or replaced) in the child's environment; the rest is inherited.
  std::vector<std::pair<std::string, std::string>> env;
  size_t max_output_bytes = 1 << 20;  // per stream; the rest is read and dropped
  // Called in the parent right after the child started (tests send it signals).
  std::function<void(pid_t)> on_spawn;
};

struct CommandResult {
  int exit_code = -1;   // -1 when killed by a signal
  int term_signal = 0;  // the signal that ended it, 0 if it exited
  bool timed_out = false;
  std::string stdout_text;
  std::string stderr_text;

  // The first line of what it said (stderr, else stdout), at most 300 characters, or its exit
  // code: for a one-line error naming a tool's own words.
  [[nodiscard]] std::string first_line() const;
};

// Runs argv (argv[0] searched in PATH, the one in options.env if set there, when it has no '/')
// with stdin from /dev/null, and waits at most options.timeout, then SIGKILLs its process group.
// Returns not_found when the program does not exist, io error when it cannot be started.
Expected<CommandResult> run_command(const std::vector<std::string>& argv,
                                    const CommandOptions& options = {});

// The full path of executable `name` in the ':'-separated `path_list`, or empty when none.
std::optional<std::string> find_executable(const std::string& name, const std::string& path_list);

}  // namespace kvprof::sys
