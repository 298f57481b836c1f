// The report's figures as data, shared by the HTML page (Chart.js draws them) and the static
// PNG/SVG images (cairo draws them): peak memory vs concurrency (fig 1), throughput vs
// concurrency (fig 2), latency percentiles vs concurrency. Every series says what its numbers
// are (measured, engine-reported, estimated, simulated, reference).
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/report/html/run_data.hpp"

namespace kvprof::report::html {

struct FigureSeries {
  std::string name;
  Nature nature = Nature::measured;
  int color = 0;        // palette index: a measurement and its estimate share one
  bool dashed = false;  // estimates, references and high percentiles
  bool marker = true;   // points drawn
  std::vector<double> x, y;
};

// A labelled point, e.g. where memory runs out; x in category indices like the series.
struct FigureMark {
  double x = 0, y = 0;
  std::string label;
  int color = -1;  // palette index; -1 the capacity colour
};

struct Figure {
  std::string id;  // file stem: fig1_mem_vs_concurrency
  std::string title;
  std::string subtitle;  // run, model, engine, device
  std::string x_label, y_label;
  std::string y_unit;                         // for tooltips: GiB, MiB, tokens/s, ms
  std::vector<std::string> categories;        // x positions (concurrencies), evenly spaced
  std::vector<FigureSeries> series;           // x holds category indices
  std::vector<FigureSeries> hlines;           // horizontal lines (capacity), y only
  std::vector<FigureMark> marks;              // labelled points drawn over the series
  [[nodiscard]] std::string natures() const;  // "data: simulated (GPU memory), estimated (...)"
};

// Memory unit for a figure whose largest value is `max_bytes`: GiB from 1 GiB up, else MiB.
struct MemoryUnit {
  const char* name;
  double bytes;
};
MemoryUnit memory_unit(double max_bytes);

// One line naming the run: model, engine and version, device, kvprof version.
std::string run_caption(const RunData& run);
// The same in three short lines (model; engine and version; device, kvprof, SIMULATED).
std::vector<std::string> run_caption_lines(const RunData& run);

Figure memory_vs_concurrency(std::span<const RunData> runs);
Figure throughput_vs_concurrency(std::span<const RunData> runs);
// `which`: "ttft", "itl" or "e2e".
Figure latency_vs_concurrency(std::span<const RunData> runs, const std::string& which);

// The figure for the page (Chart.js draws it from this).
nlohmann::json figure_json(const Figure& figure);

}  // namespace kvprof::report::html
