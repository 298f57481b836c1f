// LTTB with peaks kept (see downsample.hpp).
#include "kvprof/report/html/downsample.hpp"

#include <algorithm>
#include <cmath>

namespace kvprof::report::html {

std::vector<size_t> downsample_keep_peaks(std::span<const double> x, std::span<const double> y,
                                          size_t n_buckets) {
  const size_t n = std::min(x.size(), y.size());
  std::vector<size_t> keep;
  if (n_buckets == 0 || n <= 3 * n_buckets + 2) {
    keep.resize(n);
    for (size_t i = 0; i < n; ++i)
      keep[i] = i;
    return keep;
  }
  keep.reserve(3 * n_buckets + 2);
  keep.push_back(0);
  // Buckets split the points between the first and the last evenly by count.
  const double width = static_cast<double>(n - 2) / static_cast<double>(n_buckets);
  const auto bucket_begin = [&](size_t b) {
    return std::min(n - 1, 1 + static_cast<size_t>(std::floor(static_cast<double>(b) * width)));
  };
  size_t previous = 0;  // the LTTB point of the previous bucket
  std::vector<size_t> picked;
  for (size_t b = 0; b < n_buckets; ++b) {
    const size_t begin = bucket_begin(b);
    const size_t end = bucket_begin(b + 1);
    if (begin >= end) continue;
    // The mean of the next bucket (or the last point) is the third corner.
    const size_t next_begin = end;
    const size_t next_end = b + 2 <= n_buckets ? bucket_begin(b + 2) : n;
    double mean_x = 0, mean_y = 0;
    const size_t count = std::max<size_t>(1, next_end - next_begin);
    for (size_t i = next_begin; i < next_end; ++i) {
      mean_x += x[i];
      mean_y += y[i];
    }
    if (next_end > next_begin) {
      mean_x /= static_cast<double>(count);
      mean_y /= static_cast<double>(count);
    } else {
      mean_x = x[n - 1];
      mean_y = y[n - 1];
    }
    size_t best = begin, highest = begin, lowest = begin;
    double best_area = -1;
    for (size_t i = begin; i < end; ++i) {
      const double area = std::abs((x[previous] - mean_x) * (y[i] - y[previous]) -
                                   (x[previous] - x[i]) * (mean_y - y[previous]));
      if (area > best_area) {
        best_area = area;
        best = i;
      }
      if (y[i] > y[highest]) highest = i;
      if (y[i] < y[lowest]) lowest = i;
    }
    picked = {best, highest, lowest};
    std::sort(picked.begin(), picked.end());
    picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
    keep.insert(keep.end(), picked.begin(), picked.end());
    previous = best;
  }
  keep.push_back(n - 1);
  return keep;
}

}  // namespace kvprof::report::html
