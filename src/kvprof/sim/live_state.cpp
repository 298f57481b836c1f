// The live-state file of the simulated GPU: format, atomic writes, rate limiting.
#include "kvprof/sim/live_state.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace kvprof::sim {

std::string live_state_text(const LiveMemory& m) {
  std::string text = fmt::format("gpu 0 {} {} {}\n", m.total_bytes, m.reserved_bytes, m.used_bytes);
  if (m.pid != 0) text += fmt::format("proc 0 {} {}\n", m.pid, m.used_bytes);
  return text;
}

std::optional<LiveMemory> parse_live_state(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::optional<LiveMemory> result;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind;
    int index = -1;
    words >> kind >> index;
    if (kind == "gpu" && index == 0) {
      LiveMemory m;
      if (!(words >> m.total_bytes >> m.reserved_bytes >> m.used_bytes)) return std::nullopt;
      result = m;
    } else if (kind == "proc" && index == 0 && result) {
      uint64_t used = 0;
      if (!(words >> result->pid >> used)) return std::nullopt;
    }
  }
  return result;
}

Expected<void> write_live_state(const std::string& path, const LiveMemory& memory) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const std::string text = live_state_text(memory);
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    return fail(ErrorKind::io, fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) {
    std::remove(tmp.c_str());
    return fail(ErrorKind::io, fmt::format("cannot write {}", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return fail(ErrorKind::io, fmt::format("cannot rename {} to {}: {}", tmp, path, why));
  }
  return {};
}

LiveStateWriter::LiveStateWriter(std::string path, std::chrono::microseconds min_interval)
    : m_path(std::move(path)), m_min_interval(min_interval) {}

void LiveStateWriter::update(const LiveMemory& memory, Clock::time_point now) {
  m_current = memory;
  const bool same = m_written && m_written->used_bytes == memory.used_bytes &&
                    m_written->total_bytes == memory.total_bytes &&
                    m_written->reserved_bytes == memory.reserved_bytes &&
                    m_written->pid == memory.pid;
  m_pending = !same;
  flush(now);
}

void LiveStateWriter::flush(Clock::time_point now, bool force) {
  if (!m_pending || m_path.empty()) return;
  if (!force && m_written && now - m_last_write < m_min_interval) return;
  if (auto ok = write_live_state(m_path, m_current); !ok) {
    m_last_error = ok.error().message;
  }
  m_written = m_current;
  m_last_write = now;
  m_pending = false;
  ++m_writes;
}

std::optional<LiveStateWriter::Clock::time_point> LiveStateWriter::pending_due() const {
  if (!m_pending || m_path.empty()) return std::nullopt;
  return m_last_write + m_min_interval;
}

}  // namespace kvprof::sim
