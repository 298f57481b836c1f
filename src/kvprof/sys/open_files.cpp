// The open-file limit (see open_files.hpp).
#include "kvprof/sys/open_files.hpp"

#include <sys/resource.h>

#include <fmt/format.h>

namespace kvprof::sys {

namespace {

OpenFileLimit current() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return {};
  return {static_cast<uint64_t>(r.rlim_cur), static_cast<uint64_t>(r.rlim_max)};
}

}  // namespace

OpenFileLimit raise_open_file_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
  return current();
}

Expected<void> check_open_files_for(uint64_t in_flight) {
  const OpenFileLimit limit = current();
  if (limit.soft == 0 || in_flight + k_reserved_open_files <= limit.soft) return {};
  return fail(ErrorKind::usage,
              fmt::format("{} requests at once need about {} open files, but this process may "
                          "open {} (the hard limit, `ulimit -Hn`, is {}); raise it (e.g. `ulimit "
                          "-n {}` as root, or LimitNOFILE in a systemd unit) or lower the "
                          "concurrency",
                          in_flight, in_flight + k_reserved_open_files, limit.soft, limit.hard,
                          in_flight + k_reserved_open_files));
}

}  // namespace kvprof::sys
