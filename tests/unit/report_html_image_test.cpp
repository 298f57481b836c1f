// Tests for src/kvprof/report/html/image.cpp: tick steps and labels of the PNG/SVG figures.
#include "kvprof/report/html/image.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace kvprof::report::html {
namespace {

TEST(FigureTicks, LabelsAreExactAndDistinctForEveryNiceStep) {
  // Gridlines 0.25 apart were labelled 0.0, 0.2, 0.5, 0.8.
  EXPECT_EQ(tick_text(0.25, 0.25), "0.25");
  EXPECT_EQ(tick_text(0.75, 0.25), "0.75");
  EXPECT_EQ(tick_text(7.5, 2.5), "7.5");
  EXPECT_EQ(tick_text(20, 5), "20");
  EXPECT_EQ(tick_text(0.3, 0.1), "0.3");
  for (double range : {0.9, 1.3, 7.0, 12.0, 95.0, 1234.0, 0.012}) {
    const double step = nice_step(range, 6);
    std::set<std::string> labels;
    for (int i = 0; i * step <= range * 1.1; ++i)
      EXPECT_TRUE(labels.insert(tick_text(i * step, step)).second)
          << "range " << range << " step " << step << " label " << tick_text(i * step, step);
  }
}

}  // namespace
}  // namespace kvprof::report::html
