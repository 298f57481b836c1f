// report/html/csv.cpp: the column reader of run-folder traces.
#include "kvprof/report/html/csv.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace kvprof::report::html {
namespace {

TEST(PlotCsv, ReadsNamedColumnsInAnyOrder) {
  const auto t = read_csv("a,b,c\n1,2,x\n3,4.5,y\n", {{"b", "a"}, {"c"}, {}, {}});
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->n_rows, 2u);
  EXPECT_EQ(t->numeric[0], (std::vector<double>{2, 4.5}));
  EXPECT_EQ(t->numeric[1], (std::vector<double>{1, 3}));
  EXPECT_EQ(t->text[0], (std::vector<std::string>{"x", "y"}));
}

TEST(PlotCsv, EmptyAndNonNumericCellsAreMissingNotZero) {
  const auto t = read_csv("t,v\n1,\n2,abc\n3,7\n", {{"v", "nope"}, {}, {}, {}});
  ASSERT_TRUE(t);
  EXPECT_TRUE(std::isnan(t->numeric[0][0]));
  EXPECT_TRUE(std::isnan(t->numeric[0][1]));
  EXPECT_EQ(t->numeric[0][2], 7);
  EXPECT_TRUE(std::isnan(t->numeric[1][2]));  // a column the header lacks
}

TEST(PlotCsv, QuotedCellsKeepTheirCommasAndQuotes) {
  const auto t = read_csv("id,msg,n\n1,\"a, \"\"b\"\"\",5\r\n", {{"n"}, {"msg"}, {}, {}});
  ASSERT_TRUE(t);
  ASSERT_EQ(t->n_rows, 1u);
  EXPECT_EQ(t->text[0][0], "a, \"b\"");
  EXPECT_EQ(t->numeric[0][0], 5);
}

TEST(PlotCsv, FilterKeepsMatchingRowsOnly) {
  const auto t = read_csv("kind,v\ndevice,1\nprocess,2\ndevice,3\n", {{"v"}, {}, "kind", "device"});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->numeric[0], (std::vector<double>{1, 3}));
}

TEST(PlotCsv, ACutOffLastRowIsSkippedAndCounted) {
  const auto t = read_csv("a,b,c\n1,2,3\n4,5", {{"c"}, {}, {}, {}});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->n_rows, 1u);
  EXPECT_EQ(t->skipped_rows, 1u);
}

TEST(PlotCsv, RejectsNoHeaderAndOverlongLines) {
  EXPECT_FALSE(read_csv("", {{"a"}, {}, {}, {}}));
  const std::string long_line = "a\n" + std::string(k_csv_max_line_bytes + 1, '1') + "\n";
  const auto t = read_csv(long_line, {{"a"}, {}, {}, {}});
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().kind, ErrorKind::input);
  EXPECT_FALSE(read_csv("\"unclosed\n1\n", {{"a"}, {}, {}, {}}));
}

TEST(PlotCsv, MissingFileIsAnIoError) {
  const auto t = read_csv_file("/nonexistent/kvprof.csv", {{"a"}, {}, {}, {}});
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().kind, ErrorKind::io);
}

}  // namespace
}  // namespace kvprof::report::html
