#include "kvprof/metrics/trace_csv.hpp"

#include <gtest/gtest.h>

#include "kvprof/util/strings.hpp"

namespace kvprof::metrics {
namespace {

size_t column_of(const std::vector<std::string>& header, std::string_view name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  ADD_FAILURE() << "no column " << name;
  return 0;
}

TEST(TraceCsv, HeaderStartsWithTimestampsAndStatus) {
  const auto header = split(trace_csv_header(), ',');
  ASSERT_GE(header.size(), 5U);
  EXPECT_EQ(header[0], "mono_ns");
  EXPECT_EQ(header[1], "wall_ms");
  EXPECT_EQ(header[2], "status");
  for (size_t i = 0; i < header.size(); ++i) {
    for (size_t j = i + 1; j < header.size(); ++j)
      EXPECT_NE(header[i], header[j]);
  }
}

TEST(TraceCsv, OkRowHasValuesWhereReportedAndEmptyCellsElsewhere) {
  ScrapeRecord rec;
  rec.mono_ns = 123456789;
  rec.wall_ms = 1700000000123;
  rec.status = ScrapeStatus::ok;
  rec.http_status = 200;
  rec.scrape_ms = 1.5;
  rec.skipped_lines = 0;
  rec.snapshot.engine = engines::Engine::vllm;
  rec.snapshot.kv_cache_usage = 0.4375;
  rec.snapshot.num_requests_running = 7;
  rec.snapshot.num_gpu_blocks = 27153;
  const auto header = split(trace_csv_header(), ',');
  const auto row = split(format_trace_row(rec), ',');
  ASSERT_EQ(row.size(), header.size());
  EXPECT_EQ(row[column_of(header, "mono_ns")], "123456789");
  EXPECT_EQ(row[column_of(header, "wall_ms")], "1700000000123");
  EXPECT_EQ(row[column_of(header, "status")], "ok");
  EXPECT_EQ(row[column_of(header, "scrape_ms")], "1.500");
  EXPECT_EQ(row[column_of(header, "engine")], "vllm");
  EXPECT_EQ(row[column_of(header, "kv_cache_usage")], "0.4375");
  EXPECT_EQ(row[column_of(header, "num_requests_running")], "7");
  EXPECT_EQ(row[column_of(header, "num_gpu_blocks")], "27153");
  EXPECT_EQ(row[column_of(header, "num_requests_waiting")], "");
  EXPECT_EQ(row[column_of(header, "kv_cache_used_tokens")], "");
  EXPECT_EQ(row[column_of(header, "skipped_lines")], "0");
}

TEST(TraceCsv, FailedScrapeRowSaysWhyAndLeavesFieldsEmpty) {
  ScrapeRecord rec;
  rec.status = ScrapeStatus::http_error;
  rec.http_status = 404;
  const auto header = split(trace_csv_header(), ',');
  const auto row = split(format_trace_row(rec), ',');
  ASSERT_EQ(row.size(), header.size());
  EXPECT_EQ(row[column_of(header, "status")], "http_404");
  for (size_t i = column_of(header, "engine"); i < row.size(); ++i) {
    EXPECT_EQ(row[i], "") << header[i];
  }
  rec.status = ScrapeStatus::unreachable;
  EXPECT_EQ(scrape_status_text(rec), "unreachable");
  rec.status = ScrapeStatus::timeout;
  EXPECT_EQ(scrape_status_text(rec), "timeout");
}

}  // namespace
}  // namespace kvprof::metrics
