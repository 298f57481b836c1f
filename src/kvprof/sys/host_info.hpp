// Facts about this machine for `kvprof env`: OS (uname, /etc/os-release), CPU (/proc/cpuinfo),
// RAM (/proc/meminfo), and the inference engines found on PATH with their versions.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvprof::sys {

struct OsInfo {
  std::string kernel_name;                 // "Linux"
  std::string kernel_release;              // "6.1.0-18-amd64"
  std::string machine;                     // "x86_64"
  std::optional<std::string> pretty_name;  // "Debian GNU/Linux 12 (bookworm)"
};

struct CpuInfo {
  std::optional<std::string> model;        // "AMD EPYC 7763 64-Core Processor"
  unsigned logical_cores = 0;              // "processor" entries
  std::optional<unsigned> physical_cores;  // distinct (physical id, core id), when listed
};

struct MemInfo {
  std::optional<uint64_t> total_bytes;
  std::optional<uint64_t> available_bytes;
};

struct EngineInfo {
  std::string name;                    // "vllm"
  std::optional<std::string> path;     // empty: not found on PATH
  std::optional<std::string> version;  // first version-looking line of `<tool> --version`
  std::string note;                    // why there is no version ("timed out after 5 s", ...)
};

// The engines `kvprof env` looks for, in display order.
const std::vector<std::string>& known_engines();

// PRETTY_NAME from /etc/os-release text (quotes removed); empty when absent.
std::optional<std::string> parse_os_release(std::string_view text);
// Model name, logical and physical core counts from /proc/cpuinfo text.
CpuInfo parse_cpuinfo(std::string_view text);
// MemTotal and MemAvailable from /proc/meminfo text, in bytes.
MemInfo parse_meminfo(std::string_view text);
// Picks the version line out of `--version` output: a line mentioning "version", else the first
// line with a digit (stdout first); at most 200 characters; empty when none.
std::optional<std::string> pick_version_line(std::string_view stdout_text,
                                             std::string_view stderr_text);

// uname + /etc/os-release (fields empty when unreadable).
OsInfo read_os_info();
// /proc/cpuinfo (logical cores fall back to std::thread::hardware_concurrency).
CpuInfo read_cpu_info();
// /proc/meminfo.
MemInfo read_mem_info();

// Looks up each known engine in `path_list` (':'-separated, e.g. $PATH) and runs the found ones
// with --version in parallel, each killed after `timeout`.
std::vector<EngineInfo> find_engines(const std::string& path_list,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(5));

}  // namespace kvprof::sys
