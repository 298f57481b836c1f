// /proc readers: process memory and listening-port owners.
#include "kvprof/sys/proc.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <set>

namespace kvprof::sys {
namespace {

// Parses "<spaces><digits> kB" after a "Key:" prefix; empty when malformed.
std::optional<uint64_t> parse_kb_value(std::string_view rest) {
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t'))
    rest.remove_prefix(1);
  uint64_t kb = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kb);
  if (ec != std::errc{} || end == rest.data()) return std::nullopt;
  if (kb > (UINT64_MAX >> 10)) return std::nullopt;
  return kb << 10;
}

// Calls fn(line) for each line of `text`.
template <class Fn>
void for_each_line(std::string_view text, Fn&& fn) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    fn(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
}

std::vector<std::string_view> fields_of(std::string_view line, size_t max_fields) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size() && out.size() < max_fields) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
      ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t')
      ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool is_pid_name(const char* name) {
  if (*name == '\0') return false;
  for (const char* p = name; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return false;
  }
  return true;
}

}  // namespace

Expected<int> open_regular_file(const std::string& path) {
  // Non-blocking: opening a FIFO that no one writes to would otherwise wait.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    return fail(err == ENOENT || err == ESRCH ? ErrorKind::not_found : ErrorKind::io,
                fmt::format("cannot read '{}': {}", path, std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(ErrorKind::input,
                fmt::format("'{}' is not a regular file (a folder, FIFO, socket or device)", path));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Expected<std::string> read_text_file(const std::string& path, size_t max_bytes) {
  auto opened = open_regular_file(path);
  if (!opened) return std::unexpected(opened.error());
  const int fd = *opened;
  std::string out;
  char buffer[8192];
  while (out.size() < max_bytes) {
    const ssize_t n = ::read(fd, buffer, std::min(sizeof buffer, max_bytes - out.size()));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return fail(err == ESRCH ? ErrorKind::not_found : ErrorKind::io,
                  fmt::format("cannot read '{}': {}", path, std::strerror(err)));
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

HostMemory parse_smaps_rollup(std::string_view text) {
  HostMemory out;
  for_each_line(text, [&](std::string_view line) {
    if (line.starts_with("Rss:")) out.rss_bytes = parse_kb_value(line.substr(4));
    if (line.starts_with("Pss:")) out.pss_bytes = parse_kb_value(line.substr(4));
  });
  return out;
}

HostMemory parse_proc_status(std::string_view text) {
  HostMemory out;
  for_each_line(text, [&](std::string_view line) {
    if (line.starts_with("VmRSS:")) out.rss_bytes = parse_kb_value(line.substr(6));
  });
  return out;
}

std::optional<pid_t> parse_proc_stat_pgrp(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(close + 1);
  // Fields after comm: state, ppid, pgrp.
  for (int field = 0; field < 3; ++field) {
    while (!rest.empty() && rest.front() == ' ')
      rest.remove_prefix(1);
    const size_t end = rest.find(' ');
    const std::string_view value = rest.substr(0, end);
    if (value.empty()) return std::nullopt;
    if (field == 2) {
      pid_t pgrp = 0;
      const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), pgrp);
      if (ec != std::errc{} || ptr != value.data() + value.size() || pgrp <= 0) return std::nullopt;
      return pgrp;
    }
    if (end == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(end);
  }
  return std::nullopt;
}

std::vector<pid_t> ProcSource::group_members(pid_t pgid) const {
  std::vector<pid_t> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(m_proc_root, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    pid_t pid = 0;
    const auto [ptr, perr] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (perr != std::errc{} || ptr != name.data() + name.size() || pid <= 0) continue;
    auto stat = read_text_file(fmt::format("{}/{}/stat", m_proc_root, pid), 4096);
    if (!stat) continue;  // it exited meanwhile
    if (parse_proc_stat_pgrp(*stat) == pgid) out.push_back(pid);
    if (out.size() == 4096) break;
  }
  return out;
}

Expected<HostMemory> ProcSource::sample_group(pid_t pgid) {
  if (pgid <= 0) return fail(ErrorKind::usage, fmt::format("invalid process group {}", pgid));
  HostMemory total;
  total.pid = pgid;
  bool all_pss = true;
  size_t sampled = 0;
  for (const pid_t pid : group_members(pgid)) {
    auto mem = sample(pid);
    if (!mem) continue;  // exited meanwhile, or a zombie
    ++sampled;
    total.rss_bytes = total.rss_bytes.value_or(0) + mem->rss_bytes.value_or(0);
    if (mem->pss_bytes) {
      total.pss_bytes = total.pss_bytes.value_or(0) + *mem->pss_bytes;
    } else {
      all_pss = false;
    }
  }
  if (sampled == 0) {
    return fail(ErrorKind::not_found, fmt::format("process group {} has no process left", pgid));
  }
  if (!all_pss) total.pss_bytes.reset();
  return total;
}

bool ProcSource::exists(pid_t pid) const {
  return ::access(fmt::format("{}/{}", m_proc_root, pid).c_str(), F_OK) == 0;
}

Expected<HostMemory> ProcSource::sample(pid_t pid) {
  if (pid <= 0) return fail(ErrorKind::usage, fmt::format("invalid pid {}", pid));
  if (!m_smaps_denied) {
    auto text = read_text_file(fmt::format("{}/{}/smaps_rollup", m_proc_root, pid));
    if (text) {
      HostMemory mem = parse_smaps_rollup(*text);
      if (mem.rss_bytes) {
        mem.pid = pid;
        return mem;
      }
    } else if (!exists(pid)) {
      return fail(ErrorKind::not_found, fmt::format("process {} does not exist (exited?)", pid));
    } else {
      m_smaps_denied = true;  // no permission or no smaps_rollup (kernel < 4.14)
    }
  }
  auto text = read_text_file(fmt::format("{}/{}/status", m_proc_root, pid));
  if (!text) {
    if (text.error().kind == ErrorKind::not_found) {
      return fail(ErrorKind::not_found, fmt::format("process {} does not exist (exited?)", pid));
    }
    return fail(ErrorKind::driver, text.error().message);
  }
  HostMemory mem = parse_proc_status(*text);
  mem.pid = pid;
  if (!mem.rss_bytes) {
    // Kernel threads and zombies have no VmRSS.
    return fail(ErrorKind::driver, fmt::format("process {} reports no resident memory", pid));
  }
  return mem;
}

std::vector<ListenSocket> parse_proc_net_tcp(std::string_view text) {
  std::vector<ListenSocket> out;
  size_t lines = 0;
  for_each_line(text, [&](std::string_view line) {
    if (++lines == 1 || lines > 1'000'000) return;  // header, or absurd input
    const auto f = fields_of(line, 10);
    if (f.size() < 10 || f[3] != "0A") return;  // 0A = TCP_LISTEN
    const size_t colon = f[1].rfind(':');
    if (colon == std::string_view::npos) return;
    const std::string_view port_hex = f[1].substr(colon + 1);
    unsigned port = 0;
    auto r = std::from_chars(port_hex.data(), port_hex.data() + port_hex.size(), port, 16);
    if (r.ec != std::errc{} || r.ptr != port_hex.data() + port_hex.size() || port > 0xFFFF) return;
    uint64_t inode = 0;
    r = std::from_chars(f[9].data(), f[9].data() + f[9].size(), inode);
    if (r.ec != std::errc{} || r.ptr != f[9].data() + f[9].size() || inode == 0) return;
    out.push_back({static_cast<uint16_t>(port), inode});
  });
  return out;
}

Expected<pid_t> find_listening_pid(uint16_t port, const std::string& proc_root) {
  std::set<uint64_t> inodes;
  bool any_table = false;
  for (const char* table : {"net/tcp", "net/tcp6"}) {
    auto text = read_text_file(fmt::format("{}/{}", proc_root, table), 64 << 20);
    if (!text) continue;  // no IPv6, for instance
    any_table = true;
    for (const auto& s : parse_proc_net_tcp(*text)) {
      if (s.port == port) inodes.insert(s.inode);
    }
  }
  if (!any_table) {
    return fail(ErrorKind::driver, fmt::format("cannot read {}/net/tcp", proc_root));
  }
  if (inodes.empty()) {
    return fail(ErrorKind::not_found, fmt::format("no process listens on TCP port {}", port));
  }
  DIR* proc = ::opendir(proc_root.c_str());
  if (proc == nullptr) {
    return fail(ErrorKind::driver,
                fmt::format("cannot list {}: {}", proc_root, std::strerror(errno)));
  }
  std::optional<pid_t> found;
  while (const dirent* entry = ::readdir(proc)) {
    if (!is_pid_name(entry->d_name)) continue;
    const std::string fd_dir = fmt::format("{}/{}/fd", proc_root, entry->d_name);
    DIR* fds = ::opendir(fd_dir.c_str());
    if (fds == nullptr) continue;  // another user's process, or it just exited
    while (const dirent* fd = ::readdir(fds)) {
      if (fd->d_name[0] == '.') continue;
      char target[128];
      const std::string link = fd_dir + "/" + fd->d_name;
      const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      const std::string_view t(target, static_cast<size_t>(n));
      if (!t.starts_with("socket:[") || !t.ends_with("]")) continue;
      uint64_t inode = 0;
      const auto r = std::from_chars(t.data() + 8, t.data() + t.size() - 1, inode);
      if (r.ec == std::errc{} && inodes.contains(inode)) {
        found = static_cast<pid_t>(std::stol(entry->d_name));
        break;
      }
    }
    ::closedir(fds);
    if (found) break;
  }
  ::closedir(proc);
  if (!found) {
    return fail(ErrorKind::driver,
                fmt::format("TCP port {} is open but its process cannot be inspected "
                            "(another user's? try --pid)",
                            port));
  }
  return *found;
}

}  // namespace kvprof::sys
