// What a per-engine line reader works with: one line, the figures it adds to the report, and the
// reader itself (each engine's lives in engines/<name>/log_reader.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "kvprof/enginelog/log_report.hpp"
#include "kvprof/engines/engine.hpp"

namespace kvprof::enginelog {

// One line of the log: 1-based number and text (ANSI colours removed, no newline).
struct LineInput {
  uint64_t line_no = 0;
  std::string_view text;
};

// Returns the LineRef of `in` (copies the text).
inline LineRef ref(const LineInput& in) {
  return LineRef{in.line_no, std::string(in.text)};
}

// Keeps `value`, printed in line `in`, in `slot` unless an earlier line filled it; returns true
// (the line was read either way).
template <class T>
bool keep_first(std::optional<Printed<T>>& slot, T value, const LineInput& in) {
  if (!slot) slot = Printed<T>{std::move(value), ref(in)};
  return true;
}

// Adds a figure of `component` on `device`, printed in line `in`.
inline void add_figure(EngineLogReport& report, const LineInput& in, Component component,
                       std::string device, PrintedSize size) {
  MemoryFigure f;
  f.component = component;
  f.device = std::move(device);
  f.size = std::move(size);
  f.source = ref(in);
  report.figures.push_back(std::move(f));
}

// Adds the size printed after `key` in line `in` ("GB" read as GiB) as a figure; false when the
// line has no such size.
bool add_size_after(EngineLogReport& report, const LineInput& in, std::string_view key,
                    Component component, std::string device);

// One engine's reader of startup lines, as the engine's folder makes it (engines/<name>/): `read`
// adds what it recognises in one line to the report and returns true, or returns false and
// changes nothing (its state, if any, lives in the function object, so a copy made before the
// first line reads a log of its own); `is_marker` is true for a line that bears a mark of the
// engine without figures (a logger prefix, a banner), used to detect the engine before its first
// figure.
struct LineReader {
  engines::Engine engine = engines::Engine::unknown;
  std::function<bool(const LineInput& in, EngineLogReport& report)> read;
  bool (*is_marker)(std::string_view text) = nullptr;
};

}  // namespace kvprof::enginelog
