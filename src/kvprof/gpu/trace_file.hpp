// TraceFile: an append-only CSV file written with one write(2) per call and no user-space
// buffer, so every row handed to it is in the kernel (survives a crash of kvprof) as soon as
// append() returns. Also the two clocks the traces use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kvprof/util/error.hpp"

namespace kvprof::gpu {

class TraceFile {
 public:
  TraceFile() = default;
  TraceFile(TraceFile&& other) noexcept;
  TraceFile& operator=(TraceFile&& other) noexcept;
  TraceFile(const TraceFile&) = delete;
  TraceFile& operator=(const TraceFile&) = delete;
  ~TraceFile();

  // Creates (truncates) `path` and writes `header` + '\n'; an io error naming the path and the
  // reason ("No space left on device") otherwise.
  static Expected<TraceFile> create(const std::string& path, std::string_view header);

  // Appends `text` (whole lines, '\n'-terminated); an io error when the write fails, after which
  // the file is cut back to its last whole append (no partial row), closed, and later calls fail.
  Expected<void> append(std::string_view text);

  [[nodiscard]] bool is_open() const { return m_fd >= 0; }
  [[nodiscard]] const std::string& path() const { return m_path; }
  // Closes the file (idempotent).
  void close();

 private:
  int m_fd = -1;
  std::string m_path;
  uint64_t m_size_bytes = 0;  // bytes of whole appends written so far
};

}  // namespace kvprof::gpu
