// The line splitter, the engine detection and the file reader (see parser.hpp).
#include "kvprof/enginelog/parser.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <unistd.h>

#include "kvprof/enginelog/scan.hpp"
#include "kvprof/sys/proc.hpp"

namespace kvprof::enginelog {

EngineLogParser::EngineLogParser(ParseOptions options) : m_options(options) {
  m_report.engine = options.engine;
}

void EngineLogParser::feed(std::string_view bytes) {
  if (m_report.truncated) return;
  if (bytes.size() > m_options.max_total_bytes - m_total_bytes) {
    bytes = bytes.substr(0, m_options.max_total_bytes - m_total_bytes);
    m_report.truncated = true;
  }
  m_total_bytes += bytes.size();
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    const auto part = bytes.substr(0, nl);
    if (!m_skipping) {
      if (m_line.size() + part.size() > m_options.max_line_bytes) {
        m_skipping = true;
        m_line.clear();
        m_line.shrink_to_fit();
      } else {
        m_line.append(part);
      }
    }
    if (nl == std::string_view::npos) break;
    end_line();
    bytes.remove_prefix(nl + 1);
  }
}

void EngineLogParser::end_line() {
  ++m_report.n_lines;
  if (m_skipping) {
    ++m_report.n_skipped_long_lines;
    m_skipping = false;
  } else {
    std::string_view line = m_line;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    parse_line(line);
  }
  m_line.clear();
}

void EngineLogParser::parse_line(std::string_view line) {
  std::string clean;
  if (line.find('\x1b') != std::string_view::npos) {
    clean = strip_ansi(line);
    line = clean;
  }
  const LineInput in{m_report.n_lines, line};
  const engines::Engine engine = m_report.engine;
  bool recognised = false;
  engines::Engine found = engines::Engine::unknown;
  for (auto& reader : m_options.readers) {
    if (engine != engines::Engine::unknown && engine != reader.engine) continue;
    if (reader.read(in, m_report)) {
      recognised = true;
      found = reader.engine;
      break;
    }
    if (found == engines::Engine::unknown && engine == engines::Engine::unknown &&
        reader.is_marker != nullptr && reader.is_marker(line)) {
      found = reader.engine;
    }
  }
  if (recognised) ++m_report.n_recognised_lines;
  if (engine == engines::Engine::unknown && found != engines::Engine::unknown)
    m_report.engine = found;
}

EngineLogReport EngineLogParser::finish() {
  if (!m_line.empty() || m_skipping) end_line();
  return std::move(m_report);
}

EngineLogReport parse_engine_log(std::string_view text, const ParseOptions& options) {
  EngineLogParser parser(options);
  parser.feed(text);
  return parser.finish();
}

Expected<EngineLogReport> parse_engine_log_file(const std::filesystem::path& path,
                                                const ParseOptions& options) {
  std::error_code ec;
  if (path != "-" && !std::filesystem::exists(path, ec)) {
    return fail(ErrorKind::not_found, "no such file: " + path.string());
  }
  if (std::filesystem::is_directory(path, ec)) {
    return fail(ErrorKind::input, path.string() + " is a directory, not a log file");
  }
  // "-" is standard input (a pipe: read to its end); any other path must be a regular file, as
  // a FIFO no one writes to would wait forever.
  std::unique_ptr<FILE, int (*)(FILE*)> file(nullptr, &std::fclose);
  if (path == "-") {
    file.reset(::fdopen(::dup(0), "rb"));
  } else {
    auto fd = sys::open_regular_file(path.string());
    if (!fd) return std::unexpected(fd.error());
    file.reset(::fdopen(*fd, "rb"));
    if (!file) ::close(*fd);
  }
  if (!file) {
    return fail(ErrorKind::io, "cannot read " + path.string() + ": " + std::strerror(errno));
  }
  EngineLogParser parser(options);
  std::string buffer(1 << 16, '\0');
  uint64_t total = 0;
  while (total <= options.max_total_bytes) {
    const size_t n = std::fread(buffer.data(), 1, buffer.size(), file.get());
    if (n == 0) break;
    total += n;
    parser.feed(std::string_view(buffer.data(), n));
  }
  if (std::ferror(file.get())) {
    return fail(ErrorKind::io, "error reading " + path.string() + ": " + std::strerror(errno));
  }
  return parser.finish();
}

bool add_size_after(EngineLogReport& report, const LineInput& in, std::string_view key,
                    Component component, std::string device) {
  Cursor c(in.text);
  if (!c.seek_past(key)) return false;
  auto size = c.read_size(GbMeans::gib);
  if (!size) return false;
  add_figure(report, in, component, std::move(device), std::move(*size));
  return true;
}

}  // namespace kvprof::enginelog
