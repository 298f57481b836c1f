// Static images of the report's figures (fig1_mem_vs_concurrency.png/.svg, ...) drawn with
// cairo: title, the runs it shows, what the data are, axes with units, grid, legend.
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "kvprof/report/html/figures.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::report::html {

enum class ImageFormat { png, svg };

// Draws `figure` into `path` (width x height in CSS pixels; PNGs at twice that for sharpness);
// io error when the file cannot be written.
// A round tick step for `range`: 1, 2, 2.5 or 5 times a power of ten, about `n` ticks.
double nice_step(double range, int n);

// The label of tick value `v` on an axis of ticks `step` apart, with as many decimals as the step
// has (0.25 apart: "0.25", "0.50"), so no two labels round alike.
std::string tick_text(double v, double step);

Expected<void> write_figure(const Figure& figure, const std::filesystem::path& path,
                            ImageFormat format, int width = 1100, int height = 680);

// Draws `figures` one above the other into `path`, each width x height; an SVG also carries
// every figure's title, axis labels and marks as text (<title>, <desc>); io error as above.
Expected<void> write_figures(std::span<const Figure> figures, const std::filesystem::path& path,
                             ImageFormat format, int width = 1100, int height = 680);

}  // namespace kvprof::report::html
