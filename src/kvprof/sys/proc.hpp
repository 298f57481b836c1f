// /proc readers: host memory of a process (RSS and PSS from smaps_rollup, else VmRSS from
// status) and the process that listens on a TCP port (/proc/net/tcp{,6} + /proc/*/fd). Parsers
// take text so tests feed them fixtures; readers take a proc root so tests can fake /proc.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::sys {

inline constexpr const char* k_proc_root = "/proc";

// Host memory of one process; empty fields were not available.
struct HostMemory {
  pid_t pid = 0;
  std::optional<uint64_t> rss_bytes;
  std::optional<uint64_t> pss_bytes;  // proportional set size (smaps_rollup only)
};

// Parses /proc/PID/smaps_rollup text: "Rss:" and "Pss:" (kB) into bytes.
HostMemory parse_smaps_rollup(std::string_view text);

// Parses /proc/PID/status text: "VmRSS:" (kB) into rss_bytes.
HostMemory parse_proc_status(std::string_view text);

// The process group id from /proc/PID/stat text ("pid (comm) state ppid pgrp ..."; comm may hold
// spaces and parentheses); nullopt when malformed.
std::optional<pid_t> parse_proc_stat_pgrp(std::string_view text);

// Host memory of processes, read from `proc_root` (default /proc).
class ProcSource {
 public:
  explicit ProcSource(std::string proc_root = k_proc_root) : m_proc_root(std::move(proc_root)) {}

  // RSS and PSS of `pid` from smaps_rollup, else RSS from status (smaps_rollup needs ptrace
  // access to the process); not_found when the process does not exist (or exited), driver error
  // when neither file can be read.
  Expected<HostMemory> sample(pid_t pid);

  // The summed RSS and PSS of every process of process group `pgid` (a launched server and
  // the workers it forks); pid = pgid. PSS only when every member has it. not_found when no
  // process of the group is left.
  Expected<HostMemory> sample_group(pid_t pgid);

  // The pids of process group `pgid` (from each /proc/PID/stat), at most 4,096.
  [[nodiscard]] std::vector<pid_t> group_members(pid_t pgid) const;

  // True when `pid` exists.
  [[nodiscard]] bool exists(pid_t pid) const;

 private:
  std::string m_proc_root;
  bool m_smaps_denied = false;  // do not retry smaps_rollup once it was refused
};

// One listening socket from /proc/net/tcp or tcp6.
struct ListenSocket {
  uint16_t port = 0;
  uint64_t inode = 0;
};

// Parses /proc/net/tcp or /proc/net/tcp6 text and returns the sockets in LISTEN state (st 0A);
// malformed lines are skipped.
std::vector<ListenSocket> parse_proc_net_tcp(std::string_view text);

// The pid of the process that listens on TCP `port` (IPv4 or IPv6). not_found when no socket
// listens there; driver error when one does but its owner cannot be seen (another user's process).
Expected<pid_t> find_listening_pid(uint16_t port, const std::string& proc_root = k_proc_root);

// Opens `path` for reading (a blocking, close-on-exec descriptor the caller closes) when it is a
// regular file; an input error when it is a FIFO, socket or device (reading one could wait
// forever for a writer), not_found or io otherwise. Never blocks.
Expected<int> open_regular_file(const std::string& path);

// Reads a small regular text file whole (at most `max_bytes`); an error from open_regular_file,
// or an io error naming the path.
Expected<std::string> read_text_file(const std::string& path, size_t max_bytes = 1 << 20);

}  // namespace kvprof::sys
