// The simulated GPU's live-state file, read by the fake NVML library so kvprof's sampler sees
// memory that moves with the simulated load. One line per GPU and per process:
//   gpu 0 <total_bytes> <reserved_bytes> <used_bytes>
//   proc 0 <pid> <used_bytes>
// used = non_torch + weights + KV pool + cuda graphs + activation of the current step, so it
// drops back when the engine goes idle. Real vLLM differs here: PyTorch's caching allocator keeps
// its peak reserved, so NVML's "used" stays at the high-water mark after a burst.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "kvprof/util/error.hpp"

namespace kvprof::sim {

struct LiveMemory {
  uint64_t total_bytes = 0;
  uint64_t reserved_bytes = 0;
  uint64_t used_bytes = 0;
  uint32_t pid = 0;  // 0 = no process line (server stopped)
};

// The file's text for `memory`.
std::string live_state_text(const LiveMemory& memory);

// Parses the gpu 0 line of a live-state file (used by tests); nullopt when absent or malformed.
std::optional<LiveMemory> parse_live_state(const std::string& text);

// Writes `path` atomically (temporary file + rename); io error on failure.
Expected<void> write_live_state(const std::string& path, const LiveMemory& memory);

// Rewrites the file when the figures change, at most once per `min_interval`; a change made
// too soon is kept pending and written by flush() once the interval has passed.
class LiveStateWriter {
 public:
  using Clock = std::chrono::steady_clock;
  LiveStateWriter(std::string path, std::chrono::microseconds min_interval);

  // Records the current figures and writes them if the interval allows.
  void update(const LiveMemory& memory, Clock::time_point now);
  // Writes a pending change whose interval has passed (or any, with force).
  void flush(Clock::time_point now, bool force = false);
  // When a pending change is due, if any.
  [[nodiscard]] std::optional<Clock::time_point> pending_due() const;
  [[nodiscard]] uint64_t writes() const { return m_writes; }
  [[nodiscard]] const std::string& last_error() const { return m_last_error; }

 private:
  std::string m_path;
  std::chrono::microseconds m_min_interval;
  std::optional<LiveMemory> m_written;
  LiveMemory m_current;
  bool m_pending = false;
  Clock::time_point m_last_write{};
  uint64_t m_writes = 0;
  std::string m_last_error;
};

}  // namespace kvprof::sim
