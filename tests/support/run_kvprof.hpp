// Test-only: runs the kvprof binary with arguments through the shell and returns its exit code
// and everything it printed (stdout and stderr together).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace kvprof::test {

struct Run {
  int rc = -1;      // exit code; -1 when it did not exit normally
  std::string out;  // stdout and stderr
};

// `command` run by /bin/sh, its stderr with its stdout.
inline Run run_shell(const std::string& command) {
  Run r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `kvprof <args>` with `env` ("NAME=value ...") added to the environment; both are shell text
// (quote what needs quoting).
inline Run run_kvprof_env(const std::string& env, const std::string& args) {
  return run_shell((env.empty() ? std::string() : "env " + env + " ") + KVPROF_BIN + " " + args);
}

// `kvprof <args>`; `args` is shell text (quote what needs quoting).
inline Run run_kvprof(const std::string& args) {
  return run_kvprof_env("", args);
}

// The JSON object in `out` (from its first '{' to its last '}'; progress lines around it are
// ignored); a discarded value when there is none or it does not parse.
inline nlohmann::json json_in(const std::string& out) {
  const auto open = out.find('{');
  const auto close = out.rfind('}');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  return nlohmann::json::parse(out.substr(open, close - open + 1), nullptr, false);
}

// Debian's jq (scripts/setup.sh installs it) with `args` (shell text): the predecessor's recipes
// run as its users run them. rc 127 when jq is missing.
inline Run run_jq(const std::string& args) {
  return run_shell("jq " + args);
}

}  // namespace kvprof::test
