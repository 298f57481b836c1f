// Files written whole or not at all (see atomic_file.hpp).
#include "kvprof/util/atomic_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

namespace kvprof {

namespace fs = std::filesystem;

Expected<void> write_file_atomically(const fs::path& path,
                                     const std::function<void(std::ostream& out)>& write) {
  const fs::path tmp = path.string() + fmt::format(".tmp.{}", ::getpid());
  const auto failed = [&](const std::string& why) -> Expected<void> {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return fail(ErrorKind::io, fmt::format("cannot write {}: {}", path.string(), why));
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return failed(std::strerror(errno));
    write(out);
    out.flush();
    if (!out) return failed(errno != 0 ? std::strerror(errno) : "write failed");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return failed(ec.message());
  return {};
}

Expected<void> write_file_atomically(const fs::path& path, std::string_view text) {
  return write_file_atomically(path, [text](std::ostream& out) {
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  });
}

}  // namespace kvprof
