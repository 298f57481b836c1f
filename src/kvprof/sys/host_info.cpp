// OS, CPU, RAM and inference-engine discovery for `kvprof env`.
#include "kvprof/sys/host_info.hpp"

#include <fmt/format.h>
#include <sys/utsname.h>

#include <charconv>
#include <future>
#include <set>
#include <thread>
#include <utility>

#include "kvprof/sys/proc.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::sys {
namespace {

constexpr size_t k_max_version_chars = 200;

// Splits "key<sep>value" into trimmed halves; false without `sep`.
bool split_key_value(std::string_view line, char sep, std::string& key, std::string& value) {
  const size_t at = line.find(sep);
  if (at == std::string_view::npos) return false;
  key = trim(line.substr(0, at));
  value = trim(line.substr(at + 1));
  return true;
}

std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end == text.data()) return std::nullopt;
  return v;
}

std::optional<std::string> first_line_where(std::string_view text, bool (*pred)(std::string_view)) {
  for (const std::string& raw : split(text, '\n')) {
    std::string line = trim(raw);
    if (line.empty() || !pred(line)) continue;
    if (line.size() > k_max_version_chars) line.resize(k_max_version_chars);
    return line;
  }
  return std::nullopt;
}

bool mentions_version(std::string_view line) {
  return to_lower(line).find("version") != std::string::npos;
}
bool has_digit(std::string_view line) {
  return line.find_first_of("0123456789") != std::string_view::npos;
}

}  // namespace

const std::vector<std::string>& known_engines() {
  static const std::vector<std::string> engines{
      "vllm", "sglang", "trtllm-serve", "llama-server", "ollama", "text-generation-launcher"};
  return engines;
}

std::optional<std::string> parse_os_release(std::string_view text) {
  for (const std::string& line : split(text, '\n')) {
    std::string key, value;
    if (!split_key_value(line, '=', key, value) || key != "PRETTY_NAME") continue;
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    if (value.empty()) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

CpuInfo parse_cpuinfo(std::string_view text) {
  CpuInfo out;
  std::set<std::pair<std::string, std::string>> cores;
  std::string physical_id;
  bool any_core_id = false;
  for (const std::string& line : split(text, '\n')) {
    std::string key, value;
    if (!split_key_value(line, ':', key, value)) continue;
    if (key == "processor") {
      ++out.logical_cores;
      physical_id.clear();
    } else if (key == "model name" && !out.model && !value.empty()) {
      out.model = value;
    } else if (key == "physical id") {
      physical_id = value;
    } else if (key == "core id") {
      any_core_id = true;
      cores.emplace(physical_id, value);
    }
  }
  if (any_core_id && !cores.empty()) out.physical_cores = static_cast<unsigned>(cores.size());
  return out;
}

MemInfo parse_meminfo(std::string_view text) {
  MemInfo out;
  for (const std::string& line : split(text, '\n')) {
    std::string key, value;
    if (!split_key_value(line, ':', key, value)) continue;
    if (key != "MemTotal" && key != "MemAvailable") continue;
    const auto kb = parse_u64(value);  // "123456 kB"
    if (!kb || *kb > (UINT64_MAX >> 10)) continue;
    (key == "MemTotal" ? out.total_bytes : out.available_bytes) = *kb << 10;
  }
  return out;
}

std::optional<std::string> pick_version_line(std::string_view stdout_text,
                                             std::string_view stderr_text) {
  if (auto v = first_line_where(stdout_text, mentions_version)) return v;
  if (auto v = first_line_where(stdout_text, has_digit)) return v;
  if (auto v = first_line_where(stderr_text, mentions_version)) return v;
  return first_line_where(stderr_text, has_digit);
}

OsInfo read_os_info() {
  OsInfo out;
  utsname u{};
  if (::uname(&u) == 0) {
    out.kernel_name = u.sysname;
    out.kernel_release = u.release;
    out.machine = u.machine;
  }
  for (const char* path : {"/etc/os-release", "/usr/lib/os-release"}) {
    if (auto text = read_text_file(path, 64 << 10)) {
      out.pretty_name = parse_os_release(*text);
      if (out.pretty_name) break;
    }
  }
  return out;
}

CpuInfo read_cpu_info() {
  CpuInfo out;
  if (auto text = read_text_file("/proc/cpuinfo", 16 << 20)) out = parse_cpuinfo(*text);
  if (out.logical_cores == 0) out.logical_cores = std::thread::hardware_concurrency();
  return out;
}

MemInfo read_mem_info() {
  if (auto text = read_text_file("/proc/meminfo", 1 << 20)) return parse_meminfo(*text);
  return {};
}

std::vector<EngineInfo> find_engines(const std::string& path_list,
                                     std::chrono::milliseconds timeout) {
  std::vector<EngineInfo> out;
  std::vector<std::future<void>> pending;
  out.reserve(known_engines().size());
  for (const std::string& name : known_engines()) {
    out.emplace_back();
    out.back().name = name;
  }
  for (EngineInfo& engine : out) {
    engine.path = find_executable(engine.name, path_list);
    if (!engine.path) continue;
    pending.push_back(std::async(std::launch::async, [&engine, &path_list, timeout] {
      CommandOptions options;
      options.timeout = timeout;
      options.max_output_bytes = 64 << 10;
      options.env = {{"PATH", path_list}};
      auto result = run_command({*engine.path, "--version"}, options);
      if (!result) {
        engine.note = result.error().message;
      } else if (result->timed_out) {
        engine.note = timeout.count() % 1000 == 0
                          ? fmt::format("--version timed out after {} s", timeout.count() / 1000)
                          : fmt::format("--version timed out after {} ms", timeout.count());
      } else {
        engine.version = pick_version_line(result->stdout_text, result->stderr_text);
        if (!engine.version) {
          engine.note =
              result->exit_code >= 0
                  ? fmt::format("--version printed no version (exit {})", result->exit_code)
                  : fmt::format("--version killed by signal {}", result->term_signal);
        }
      }
    }));
  }
  for (auto& f : pending)
    f.get();
  return out;
}

}  // namespace kvprof::sys
