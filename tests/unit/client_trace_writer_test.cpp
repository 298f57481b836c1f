// Tests for src/kvprof/client/trace_writer.cpp: the CSV row layout and quoting.
#include "kvprof/client/trace_writer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "kvprof/report/html/csv.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::client {
namespace {

// Splits one CSV row, honouring quotes.
std::vector<std::string> parse_csv_row(const std::string& row) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < row.size(); ++i) {
    const char c = row[i];
    if (quoted) {
      if (c == '"' && i + 1 < row.size() && row[i + 1] == '"') {
        out.back().push_back('"');
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back().push_back(c);
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else if (c != '\n') {
      out.back().push_back(c);
    }
  }
  return out;
}

TEST(TraceWriter, RowHasOneFieldPerHeaderColumnWithTimesAndTokens) {
  const auto path = std::filesystem::temp_directory_path() / "kvprof_trace_writer_test.csv";
  auto writer = TraceWriter::open(path, 1000.0).value();
  RequestRecord r;
  r.request_id = 9;
  r.condition_id = "in8_out2_c1_low";
  r.input_len = 8;
  r.max_tokens = 2;
  r.intended_send_ns = 500'000'000;
  r.actual_send_ns = 501'000'000;
  r.first_token_ns = 600'000'000;
  r.end_ns = 700'000'000;
  r.chunks = {{600'000'000, 1}, {650'000'000, 3}};
  r.tokens_streamed = 4;
  r.usage = Usage{8, 4};
  r.http_status = 200;
  r.warning = "completion_tokens 4 != max_tokens 2";
  r.error_text = "said \"hi\", then";
  ASSERT_TRUE(writer.write(r));
  std::ifstream in(path);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  std::filesystem::remove(path);
  const auto names = split(header, ',');
  const auto cells = parse_csv_row(row);
  ASSERT_EQ(cells.size(), names.size());
  std::map<std::string, std::string> m;
  for (size_t i = 0; i < names.size(); ++i)
    m[names[i]] = cells[i];
  EXPECT_EQ(m["request_id"], "9");
  EXPECT_EQ(m["status"], "ok");
  EXPECT_EQ(m["error_kind"], "");
  EXPECT_EQ(m["prompt_tokens"], "8");
  EXPECT_EQ(m["intended_send_unix_s"], "1000.500000");
  EXPECT_EQ(m["first_token_unix_s"], "1000.600000");
  EXPECT_EQ(m["send_delay_ms"], "1.000");
  EXPECT_EQ(m["ttft_ms"], "100.000");
  EXPECT_EQ(m["e2e_ms"], "200.000");
  EXPECT_EQ(m["itl_mean_ms"], "16.667");  // 50 ms for the 3 tokens after the first
  EXPECT_EQ(m["token_times_ms"], "100.000;150.000x3");
  EXPECT_EQ(m["error"], "said \"hi\", then");
}

TEST(TraceWriter, TheRowOfTheLongestGenerationIsReadableByKvprof) {
  // The most token times a record keeps, each at the widest time a 600 s request can have.
  const auto path = std::filesystem::temp_directory_path() / "kvprof_trace_writer_long.csv";
  auto writer = TraceWriter::open(path, 1000.0).value();
  RequestRecord r;
  r.request_id = 1;
  r.condition_id = "in8_out140000_c1_low";
  r.max_tokens = 4'000'000;
  r.intended_send_ns = 0;
  r.actual_send_ns = 1;
  r.first_token_ns = 599'000'000'000;
  r.end_ns = 599'999'000'000;
  r.http_status = 200;
  for (size_t i = 0; i < k_max_token_chunks; ++i)
    r.chunks.push_back({599'000'000'000 + static_cast<int64_t>(i) * 60'000, 4000});
  r.tokens_streamed = k_max_token_chunks * 4000;
  ASSERT_TRUE(writer.write(r));
  const auto size = std::filesystem::file_size(path);
  EXPECT_LT(size, report::html::k_csv_max_line_bytes);
  const auto cols =
      report::html::read_csv_file(path, {{"tokens_streamed"}, {"token_times_ms"}, {}, {}});
  ASSERT_TRUE(cols.has_value()) << cols.error().message;
  ASSERT_EQ(cols->n_rows, 1u);
  EXPECT_EQ(cols->numeric[0][0], static_cast<double>(k_max_token_chunks * 4000));
  EXPECT_EQ(std::count(cols->text[0][0].begin(), cols->text[0][0].end(), ';'),
            static_cast<long>(k_max_token_chunks - 1));
  std::filesystem::remove(path);
}

TEST(TraceWriter, MissingTimesAreEmpty) {
  auto writer = TraceWriter::open(std::filesystem::temp_directory_path() / "kvprof_tw2.csv", 0);
  ASSERT_TRUE(writer);
  RequestRecord r;
  r.status = RequestStatus::error;
  r.failure = FailureKind::connect;
  r.end_ns = 1'000'000;
  const auto cells = parse_csv_row(writer->format_row(r));
  const auto names = split(TraceWriter::header().substr(0, TraceWriter::header().size() - 1), ',');
  ASSERT_EQ(cells.size(), names.size());
  EXPECT_EQ(cells[3], "connect");
  EXPECT_EQ(cells[12], "");  // first_token_unix_s
  EXPECT_EQ(cells[15], "");  // ttft_ms
  std::filesystem::remove(std::filesystem::temp_directory_path() / "kvprof_tw2.csv");
}

TEST(TraceWriter, UnwritablePathIsAnIoError) {
  auto w = TraceWriter::open("/nonexistent/dir/trace.csv", 0);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().kind, ErrorKind::io);
}

}  // namespace
}  // namespace kvprof::client
