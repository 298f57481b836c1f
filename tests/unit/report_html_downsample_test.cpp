// report/html/downsample.cpp: LTTB that keeps every bucket's peak.
#include "kvprof/report/html/downsample.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace kvprof::report::html {
namespace {

TEST(PlotDownsample, SmallSeriesAreKeptWhole) {
  const std::vector<double> x{0, 1, 2, 3}, y{5, 6, 7, 8};
  EXPECT_EQ(downsample_keep_peaks(x, y, 10), (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(PlotDownsample, AnHourAtOneKilohertzKeepsEverySpikeAndDip) {
  const size_t n = 3'600'000;
  std::vector<double> x(n), y(n);
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.01);
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<double>(i) / 1000.0;
    y[i] = 70 + std::sin(static_cast<double>(i) / 50000.0) + noise(rng);
  }
  // One-sample spikes and dips a plain LTTB or stride would most likely drop.
  const std::vector<size_t> spikes{12'345, 1'000'001, 2'999'999}, dips{777'777, 3'500'000};
  for (size_t i : spikes)
    y[i] = 80;
  for (size_t i : dips)
    y[i] = 60;
  const auto keep = downsample_keep_peaks(x, y, 2000);
  EXPECT_LE(keep.size(), 3u * 2000 + 2);
  EXPECT_GT(keep.size(), 2000u);
  EXPECT_TRUE(std::is_sorted(keep.begin(), keep.end()));
  EXPECT_EQ(std::adjacent_find(keep.begin(), keep.end()), keep.end());
  EXPECT_EQ(keep.front(), 0u);
  EXPECT_EQ(keep.back(), n - 1);
  for (size_t i : spikes)
    EXPECT_TRUE(std::binary_search(keep.begin(), keep.end(), i)) << i;
  for (size_t i : dips)
    EXPECT_TRUE(std::binary_search(keep.begin(), keep.end(), i)) << i;
  // The maximum of what is drawn is the maximum of the trace.
  double drawn_max = 0;
  for (size_t i : keep)
    drawn_max = std::max(drawn_max, y[i]);
  EXPECT_EQ(drawn_max, *std::max_element(y.begin(), y.end()));
}

TEST(PlotDownsample, PicksTheShapeOfAStep) {
  // A step from 0 to 1 at 500 of 1000: the points next to the step are drawn.
  std::vector<double> x(1000), y(1000);
  for (size_t i = 0; i < 1000; ++i) {
    x[i] = static_cast<double>(i);
    y[i] = i < 500 ? 0 : 1;
  }
  const auto keep = downsample_keep_peaks(x, y, 20);
  EXPECT_TRUE(std::binary_search(keep.begin(), keep.end(), 500u));
}

}  // namespace
}  // namespace kvprof::report::html
