// Files written whole or not at all: a reader (or a run killed mid-write) never sees half a file.
#pragma once

#include <filesystem>
#include <functional>
#include <ostream>
#include <string_view>

#include "kvprof/util/error.hpp"

namespace kvprof {

// Calls `write(out)` on a temporary file beside `path`, then renames it over `path`. An io error
// "cannot write PATH: why" when the file cannot be made, written (a full disk) or renamed; the
// temporary file is removed then and `path` keeps what it had.
Expected<void> write_file_atomically(const std::filesystem::path& path,
                                     const std::function<void(std::ostream& out)>& write);

// The same with the whole text at once.
Expected<void> write_file_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace kvprof
