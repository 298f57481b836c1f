// Downsampling a time series for display: largest-triangle-three-buckets (LTTB) picks the point
// of each bucket that keeps the shape, and each bucket's highest and lowest points are kept too,
// so no peak (or dip) is lost however far a trace is thinned.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace kvprof::report::html {

// Indices (ascending) of the points of (x, y) to draw: all of them when there are at most
// 3 * n_buckets + 2, else the first, the last, and per bucket the LTTB point plus the bucket's
// maximum and minimum of y. x must be ascending; x and y have the same size.
std::vector<size_t> downsample_keep_peaks(std::span<const double> x, std::span<const double> y,
                                          size_t n_buckets);

}  // namespace kvprof::report::html
