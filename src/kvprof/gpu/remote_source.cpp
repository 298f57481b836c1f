// Remote GPU memory: selectors, DCGM framebuffer series and the RemoteSource (see
// remote_source.hpp).
#include "kvprof/gpu/remote_source.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cmath>
#include <optional>
#include <regex>
#include <tuple>

namespace kvprof::gpu {

namespace {

constexpr size_t k_max_selector_bytes = 1024;
constexpr size_t k_max_matchers = 16;
constexpr double k_max_mib = 1ULL << 40;  // a petabyte of GPU memory: anything above is garbage

bool is_name_char(char c, bool first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
         (!first && c >= '0' && c <= '9');
}

// Why a label regex is refused before it reaches std::regex, whose compiler expands
// repetitions (`a{1000000}`) and overflows on huge counts. Prometheus (RE2) caps a count at
// 1000 and kvprof caps a pattern at 1 KiB, the same way.
std::optional<std::string> regex_problem(std::string_view pattern) {
  constexpr size_t k_max_regex_bytes = 1024;
  constexpr uint64_t k_max_regex_repeat = 1000;
  if (pattern.size() > k_max_regex_bytes) {
    return fmt::format("longer than {} bytes", k_max_regex_bytes);
  }
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\') {
      ++i;  // an escaped character is a literal
      continue;
    }
    if (pattern[i] != '{') continue;
    uint64_t count = 0;
    for (size_t j = i + 1; j < pattern.size() && pattern[j] != '}'; ++j) {
      const char c = pattern[j];
      if (c == ',') {
        count = 0;
      } else if (c >= '0' && c <= '9') {
        count = count * 10 + static_cast<uint64_t>(c - '0');
        if (count > k_max_regex_repeat) return fmt::format("a repetition count above {}", k_max_regex_repeat);
      } else {
        break;  // not a repetition: std::regex decides what it is
      }
    }
  }
  return std::nullopt;
}

Expected<LabelMatcher> parse_matcher(std::string_view& s) {
  LabelMatcher m;
  size_t i = 0;
  while (i < s.size() && is_name_char(s[i], i == 0))
    ++i;
  if (i == 0) return fail(ErrorKind::input, fmt::format("expected a label name at '{}'", s));
  m.name = std::string(s.substr(0, i));
  s.remove_prefix(i);
  if (s.starts_with("=~")) {
    m.op = LabelMatcher::Op::regex;
  } else if (s.starts_with("!~")) {
    m.op = LabelMatcher::Op::not_regex;
  } else if (s.starts_with("!=")) {
    m.op = LabelMatcher::Op::not_equal;
  } else if (s.starts_with("=")) {
    m.op = LabelMatcher::Op::equal;
  } else {
    return fail(ErrorKind::input, fmt::format("expected =, !=, =~ or !~ after label '{}'", m.name));
  }
  s.remove_prefix(m.op == LabelMatcher::Op::equal ? 1 : 2);
  if (s.empty() || s.front() != '"') {
    return fail(ErrorKind::input, fmt::format("the value of label '{}' must be quoted", m.name));
  }
  s.remove_prefix(1);
  while (true) {
    if (s.empty()) {
      return fail(ErrorKind::input, fmt::format("unterminated value of label '{}'", m.name));
    }
    const char c = s.front();
    s.remove_prefix(1);
    if (c == '"') break;
    if (c == '\\' && !s.empty()) {
      m.value += s.front() == 'n' ? '\n' : s.front();
      s.remove_prefix(1);
    } else {
      m.value += c;
    }
  }
  if (m.op == LabelMatcher::Op::regex || m.op == LabelMatcher::Op::not_regex) {
    if (const auto problem = regex_problem(m.value)) {
      return fail(ErrorKind::input, fmt::format("'{}' (label '{}') is not accepted: {}", m.value,
                                                m.name, *problem));
    }
    try {
      std::regex check(m.value);
    } catch (const std::regex_error&) {
      return fail(
          ErrorKind::input,
          fmt::format("'{}' (label '{}') is not a valid regular expression", m.value, m.name));
    }
  }
  return m;
}

std::string_view trim_view(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

const std::string* find_label(const std::map<std::string, std::string>& labels, const char* name) {
  const auto it = labels.find(name);
  return it == labels.end() || it->second.empty() ? nullptr : &it->second;
}

}  // namespace

Expected<std::vector<LabelMatcher>> parse_label_selector(std::string_view selector) {
  if (selector.size() > k_max_selector_bytes) {
    return fail(ErrorKind::input, "the GPU selector is longer than 1 KiB");
  }
  std::string_view s = trim_view(selector);
  if (s.starts_with('{')) {
    if (!s.ends_with('}')) return fail(ErrorKind::input, "the GPU selector has no closing '}'");
    s = s.substr(1, s.size() - 2);
  }
  std::vector<LabelMatcher> out;
  s = trim_view(s);
  while (!s.empty()) {
    if (out.size() == k_max_matchers) {
      return fail(ErrorKind::input, "the GPU selector has more than 16 label matchers");
    }
    auto m = parse_matcher(s);
    if (!m) return std::unexpected(m.error().with_context("GPU selector"));
    out.push_back(std::move(*m));
    s = trim_view(s);
    if (s.empty()) break;
    if (s.front() != ',') {
      return fail(ErrorKind::input, fmt::format("GPU selector: expected ',' at '{}'", s));
    }
    s = trim_view(s.substr(1));
  }
  return out;
}

bool labels_match(const std::map<std::string, std::string>& labels,
                  const std::vector<LabelMatcher>& matchers) {
  for (const LabelMatcher& m : matchers) {
    const auto it = labels.find(m.name);
    const std::string value = it == labels.end() ? std::string() : it->second;
    bool ok = false;
    switch (m.op) {
      case LabelMatcher::Op::equal:
        ok = value == m.value;
        break;
      case LabelMatcher::Op::not_equal:
        ok = value != m.value;
        break;
      case LabelMatcher::Op::regex:
      case LabelMatcher::Op::not_regex:
        try {
          ok = std::regex_match(value, std::regex(m.value));
        } catch (const std::regex_error&) {
          ok = false;
        }
        if (m.op == LabelMatcher::Op::not_regex) ok = !ok;
        break;
    }
    if (!ok) return false;
  }
  return true;
}

void add_dcgm_sample(std::vector<RemoteGpuReading>& readings, std::string_view metric_name,
                     const std::map<std::string, std::string>& labels, double value_mib) {
  std::optional<uint64_t> RemoteGpuReading::*field = nullptr;
  if (metric_name == "DCGM_FI_DEV_FB_USED") {
    field = &RemoteGpuReading::used_bytes;
  } else if (metric_name == "DCGM_FI_DEV_FB_FREE") {
    field = &RemoteGpuReading::free_bytes;
  } else if (metric_name == "DCGM_FI_DEV_FB_RESERVED") {
    field = &RemoteGpuReading::reserved_bytes;
  } else if (metric_name == "DCGM_FI_DEV_FB_TOTAL") {
    field = &RemoteGpuReading::total_bytes;
  } else {
    return;
  }
  if (!std::isfinite(value_mib) || value_mib < 0 || value_mib > k_max_mib) return;

  const std::string* host = find_label(labels, "Hostname");
  const std::string* uuid = find_label(labels, "UUID");
  const std::string* gpu = find_label(labels, "gpu");
  const std::string* mig = find_label(labels, "GPU_I_ID");
  if (!uuid && !gpu) return;  // a series that names no GPU cannot be attributed
  std::string key = fmt::format("{}/{}", host ? *host : "", uuid ? *uuid : "gpu" + *gpu);
  if (mig) key += "/" + *mig;

  const auto same_key = [&](const RemoteGpuReading& reading) { return reading.key == key; };
  auto it = std::find_if(readings.begin(), readings.end(), same_key);
  if (it == readings.end()) {
    RemoteGpuReading r;
    r.key = key;
    if (host) r.hostname = *host;
    if (uuid) r.uuid = *uuid;
    if (const std::string* name = find_label(labels, "modelName")) r.model_name = *name;
    if (gpu) {
      unsigned index = 0;
      const auto [end, ec] = std::from_chars(gpu->data(), gpu->data() + gpu->size(), index);
      if (ec == std::errc{} && end == gpu->data() + gpu->size()) r.gpu_label = index;
    }
    readings.push_back(std::move(r));
    std::sort(readings.begin(), readings.end(), [](const auto& a, const auto& b) {
      return std::tuple(a.hostname.value_or(""), a.gpu_label.value_or(~0U), a.key) <
             std::tuple(b.hostname.value_or(""), b.gpu_label.value_or(~0U), b.key);
    });
    it = std::find_if(readings.begin(), readings.end(), same_key);
  }
  (*it).*field = static_cast<uint64_t>(std::llround(value_mib * 1024.0 * 1024.0));
}

DeviceMemory to_device_memory(const RemoteGpuReading& r, unsigned index) {
  DeviceMemory m;
  m.gpu = index;
  m.used_bytes = r.used_bytes;
  m.free_bytes = r.free_bytes;
  m.reserved_bytes = r.reserved_bytes;
  if (r.total_bytes) {
    m.total_bytes = r.total_bytes;
  } else if (r.used_bytes && r.free_bytes) {
    m.total_bytes = *r.used_bytes + *r.free_bytes + r.reserved_bytes.value_or(0);
  }
  return m;
}

RemoteSource::RemoteSource(std::string what, Fetch fetch, uint32_t min_refresh_ms)
    : m_what(std::move(what)), m_fetch(std::move(fetch)), m_min_refresh(min_refresh_ms) {}

RemoteSource::RemoteSource(std::string what, Fetch fetch, uint32_t min_refresh_ms,
                           RangeFetch range_fetch, std::string history_name)
    : m_what(std::move(what)),
      m_fetch(std::move(fetch)),
      m_range_fetch(std::move(range_fetch)),
      m_history_name(std::move(history_name)),
      m_min_refresh(min_refresh_ms) {}

std::optional<std::string> RemoteSource::history_name() const {
  if (!m_range_fetch) return std::nullopt;
  return m_history_name;
}

Expected<std::vector<PastReading>> RemoteSource::history(const std::vector<unsigned>& gpus,
                                                         int64_t from_wall_ms, int64_t to_wall_ms,
                                                         uint32_t step_ms) {
  if (!m_range_fetch) return MemorySource::history(gpus, from_wall_ms, to_wall_ms, step_ms);
  std::vector<std::string> keys;
  {
    std::lock_guard lock(m_mutex);
    keys = m_keys;
  }
  if (keys.empty()) {
    return fail(ErrorKind::not_found, fmt::format("{}: no GPU was read yet", m_what));
  }
  // Fetched without the lock: a slow history answer must not hold up live samples.
  auto past = m_range_fetch(from_wall_ms, to_wall_ms, step_ms);
  if (!past) return std::unexpected(past.error().with_context(m_what));
  std::vector<PastReading> out;
  for (const auto& instant : *past) {
    for (const unsigned gpu : gpus) {
      if (gpu >= keys.size()) continue;
      for (const auto& r : instant.readings) {
        if (r.key != keys[gpu] || !r.used_bytes) continue;
        out.push_back({instant.t_wall_ms, to_device_memory(r, gpu)});
        break;
      }
    }
  }
  return out;
}

Expected<void> RemoteSource::refresh_locked() {
  const auto now = std::chrono::steady_clock::now();
  if (m_have_fetch && now - m_fetched_at < m_min_refresh) return {};
  auto readings = m_fetch();
  if (!readings) return std::unexpected(readings.error().with_context(m_what));
  std::erase_if(*readings, [](const RemoteGpuReading& r) { return !r.used_bytes; });
  if (m_keys.empty()) {
    if (readings->empty()) {
      return fail(
          ErrorKind::not_found,
          fmt::format("{}: no GPU framebuffer series (DCGM_FI_DEV_FB_USED) in the answer", m_what));
    }
    for (const auto& r : *readings)
      m_keys.push_back(r.key);
  }
  m_readings = std::move(*readings);
  m_fetched_at = now;
  m_have_fetch = true;
  return {};
}

Expected<const RemoteGpuReading*> RemoteSource::find_locked(unsigned gpu) {
  if (auto ok = refresh_locked(); !ok) return std::unexpected(ok.error());
  if (gpu >= m_keys.size()) {
    return fail(ErrorKind::driver,
                fmt::format("{}: GPU {} does not exist ({} found)", m_what, gpu, m_keys.size()));
  }
  for (const auto& r : m_readings) {
    if (r.key == m_keys[gpu]) return &r;
  }
  return fail(ErrorKind::driver, fmt::format("{}: GPU {} ({}) is missing from the last answer",
                                             m_what, gpu, m_keys[gpu]));
}

Expected<unsigned> RemoteSource::device_count() {
  std::lock_guard lock(m_mutex);
  if (auto ok = refresh_locked(); !ok) return std::unexpected(ok.error());
  return static_cast<unsigned>(m_keys.size());
}

Expected<DeviceInfo> RemoteSource::device_info(unsigned gpu) {
  std::lock_guard lock(m_mutex);
  auto r = find_locked(gpu);
  if (!r) return std::unexpected(r.error());
  DeviceInfo info;
  info.index = gpu;
  info.name = (*r)->model_name;
  info.uuid = (*r)->uuid;
  return info;
}

Expected<DeviceMemory> RemoteSource::sample_device(unsigned gpu) {
  std::lock_guard lock(m_mutex);
  auto r = find_locked(gpu);
  if (!r) return std::unexpected(r.error());
  return to_device_memory(**r, gpu);
}

Expected<std::vector<ProcessMemory>> RemoteSource::sample_processes(unsigned gpu) {
  (void)gpu;
  return std::vector<ProcessMemory>{};
}

std::vector<RemoteGpuReading> RemoteSource::last_readings() const {
  std::lock_guard lock(m_mutex);
  return m_readings;
}

}  // namespace kvprof::gpu
