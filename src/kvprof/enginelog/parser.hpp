// Reads an engine's log line by line into an EngineLogReport. Every bound is explicit: a line
// longer than max_line_bytes is skipped (counted), input past max_total_bytes is not read
// (report.truncated), and a line nobody recognises is ignored, never an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/enginelog/line_reader.hpp"
#include "kvprof/enginelog/log_report.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::enginelog {

struct ParseOptions {
  // The engine whose lines to read; unknown = detect it from the lines (the first engine whose
  // figure or logger mark appears; until then every engine's lines are read).
  engines::Engine engine = engines::Engine::unknown;
  // Every engine's line reader (engines::log_readers() gives them all); none reads nothing.
  std::vector<LineReader> readers;
  size_t max_line_bytes = 64 * 1024;
  uint64_t max_total_bytes = 256ULL << 20;
};

// Streaming parser: feed bytes in any chunks, then finish() once.
class EngineLogParser {
 public:
  explicit EngineLogParser(ParseOptions options);

  // Consumes `bytes`; lines are split on '\n' (a trailing '\r' is dropped).
  void feed(std::string_view bytes);
  // The report of the lines read so far (a line counts once its '\n' was fed).
  [[nodiscard]] const EngineLogReport& report() const { return m_report; }
  // Parses the last unterminated line and returns the report; the parser is spent afterwards.
  EngineLogReport finish();

 private:
  void end_line();
  void parse_line(std::string_view line);

  ParseOptions m_options;
  EngineLogReport m_report;
  std::string m_line;
  bool m_skipping = false;  // the current line went past max_line_bytes
  uint64_t m_total_bytes = 0;
};

// Parses a whole log held in memory.
EngineLogReport parse_engine_log(std::string_view text, const ParseOptions& options);

// Streams the file at `path` through the parser; not_found or io errors when it cannot be read.
Expected<EngineLogReport> parse_engine_log_file(const std::filesystem::path& path,
                                                const ParseOptions& options);

}  // namespace kvprof::enginelog
