// The open-file limit: every request in flight holds a socket, so a grid of high concurrency needs
// more than the usual soft limit of 1,024.
#pragma once

#include <cstdint>

#include "kvprof/util/error.hpp"

namespace kvprof::sys {

// Files this process may keep open at once (RLIMIT_NOFILE): the soft limit and the hard limit.
struct OpenFileLimit {
  uint64_t soft = 0;
  uint64_t hard = 0;
};

// Raises the soft open-file limit to the hard limit (done once at start); returns the limits in
// force afterwards (unchanged when raising was refused).
OpenFileLimit raise_open_file_limit();

// Descriptors kvprof keeps besides one socket per request in flight (files, pipes, scrapes).
inline constexpr uint64_t k_reserved_open_files = 64;

// Checks that `in_flight` requests at once fit the open-file limit; a usage error that says what
// the limit is and how to raise it otherwise.
Expected<void> check_open_files_for(uint64_t in_flight);

}  // namespace kvprof::sys
