// TraceFile and the trace clocks.
#include "kvprof/gpu/trace_file.hpp"
#include "kvprof/util/clock.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

namespace kvprof::gpu {

TraceFile::TraceFile(TraceFile&& other) noexcept
    : m_fd(std::exchange(other.m_fd, -1)),
      m_path(std::move(other.m_path)),
      m_size_bytes(other.m_size_bytes) {}

TraceFile& TraceFile::operator=(TraceFile&& other) noexcept {
  if (this != &other) {
    close();
    m_fd = std::exchange(other.m_fd, -1);
    m_path = std::move(other.m_path);
    m_size_bytes = other.m_size_bytes;
  }
  return *this;
}

TraceFile::~TraceFile() {
  close();
}

void TraceFile::close() {
  if (m_fd >= 0) ::close(m_fd);
  m_fd = -1;
}

Expected<TraceFile> TraceFile::create(const std::string& path, std::string_view header) {
  TraceFile file;
  file.m_path = path;
  file.m_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (file.m_fd < 0) {
    return fail(ErrorKind::io, fmt::format("cannot create '{}': {}", path, std::strerror(errno)));
  }
  std::string line(header);
  line += '\n';
  if (auto ok = file.append(line); !ok) return std::unexpected(ok.error());
  return file;
}

Expected<void> TraceFile::append(std::string_view text) {
  if (m_fd < 0) return fail(ErrorKind::io, fmt::format("cannot write '{}': file closed", m_path));
  const size_t size = text.size();
  while (!text.empty()) {
    const ssize_t n = ::write(m_fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      // Keep the file readable: drop the part of this append that made it to disk.
      if (::ftruncate(m_fd, static_cast<off_t>(m_size_bytes)) != 0) {
        // Nothing more can be done; the error below is what matters.
      }
      close();
      return fail(ErrorKind::io, fmt::format("cannot write '{}': {}", m_path, std::strerror(err)));
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  m_size_bytes += size;
  return {};
}

}  // namespace kvprof::gpu
