// Helpers of bench_gpu_check (benchmarks/gpu_check.cpp) that ask nvidia-smi: run a command, parse
// its CSV output, and read one GPU's memory or one process's memory as nvidia-smi reports them
// (MiB).
#pragma once

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "kvprof/util/error.hpp"

namespace gpu_check {

using kvprof::Error;
using kvprof::ErrorKind;
using kvprof::Expected;
using kvprof::fail;

// Runs `command` with /bin/sh and returns its output; an error gives the exit status and the
// first line of output (127: not found).
inline Expected<std::string> run_command(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return fail(ErrorKind::io, "cannot start a shell for: " + command);
  std::string out;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0)
    out.append(buffer, n);
  const int status = ::pclose(pipe);
  if (status == 0) return out;
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 127) return fail(ErrorKind::not_found, "not found on PATH");
  return fail(ErrorKind::driver, fmt::format("exited {}: {}", code, out.substr(0, out.find('\n'))));
}

// Splits `text` into lines of comma-separated fields with the spaces around them removed.
inline std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::vector<std::string> fields;
    for (size_t from = start; from <= end;) {
      const size_t comma = std::min(text.find(',', from), end);
      std::string field = text.substr(from, comma - from);
      field.erase(0, field.find_first_not_of(" \t\r"));
      field.erase(field.find_last_not_of(" \t\r") + 1);
      fields.push_back(std::move(field));
      from = comma + 1;
    }
    if (fields.size() > 1 || !fields[0].empty()) rows.push_back(std::move(fields));
    start = end + 1;
  }
  return rows;
}

// The number in `field`, or empty for "[N/A]" and other non-numbers.
inline std::optional<double> to_number(const std::string& field) {
  double value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (ec != std::errc() || end != field.data() + field.size()) return std::nullopt;
  return value;
}

// nvidia-smi's memory of one GPU, in MiB.
struct SmiMemory {
  std::optional<double> total_mib, reserved_mib, used_mib, free_mib;
};

// nvidia-smi's memory of GPU `gpu`; an error says why nvidia-smi could not give it. Drivers that
// do not know memory.reserved are asked again without it.
inline Expected<SmiMemory> smi_memory(unsigned gpu) {
  Error last;
  for (const bool with_reserved : {true, false}) {
    const std::string fields = with_reserved
                                   ? "index,memory.total,memory.reserved,memory.used,memory.free"
                                   : "index,memory.total,memory.used,memory.free";
    auto out = run_command(fmt::format(
        "nvidia-smi --id={} --query-gpu={} --format=csv,noheader,nounits", gpu, fields));
    if (!out) {
      last = out.error();
      if (last.kind == ErrorKind::not_found) break;
      continue;
    }
    for (const auto& row : parse_csv(*out)) {
      if (row.size() != (with_reserved ? 5U : 4U) || to_number(row[0]) != gpu) continue;
      SmiMemory m;
      size_t i = 1;
      m.total_mib = to_number(row[i++]);
      if (with_reserved) m.reserved_mib = to_number(row[i++]);
      m.used_mib = to_number(row[i++]);
      m.free_mib = to_number(row[i++]);
      return m;
    }
    last = Error{ErrorKind::driver, fmt::format("no line for GPU {} in: {}", gpu, *out)};
  }
  return std::unexpected(last.with_context("nvidia-smi"));
}

// This process's used MiB in nvidia-smi's compute-apps output, or empty when it is not listed.
inline std::optional<double> smi_process_mib(const std::string& apps_csv) {
  for (const auto& row : parse_csv(apps_csv)) {
    if (row.size() == 2 && to_number(row[0]) == static_cast<double>(::getpid())) {
      return to_number(row[1]);
    }
  }
  return std::nullopt;
}

}  // namespace gpu_check
