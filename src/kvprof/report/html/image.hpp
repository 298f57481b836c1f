// Static images of the report's figures (fig1_mem_vs_concurrency.png/.svg, ...) drawn with
// cairo: title, the runs it shows, what the data are, axes with units, grid, legend.
#pragma once

#include <filesystem>
#include <span>

#include "kvprof/report/html/figures.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::report::html {

enum class ImageFormat { png, svg };

// Draws `figure` into `path` (width x height in CSS pixels; PNGs at twice that for sharpness);
// io error when the file cannot be written.
Expected<void> write_figure(const Figure& figure, const std::filesystem::path& path,
                            ImageFormat format, int width = 1100, int height = 680);

// Draws `figures` one above the other into `path`, each width x height; an SVG also carries
// every figure's title, axis labels and marks as text (<title>, <desc>); io error as above.
Expected<void> write_figures(std::span<const Figure> figures, const std::filesystem::path& path,
                             ImageFormat format, int width = 1100, int height = 680);

}  // namespace kvprof::report::html
