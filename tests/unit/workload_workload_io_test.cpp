// Tests for src/kvprof/workload/workload_io.cpp: round trips and clear errors on bad lines.
#include "kvprof/workload/workload_io.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

namespace kvprof::workload {
namespace {

std::vector<RequestSpec> sample(PromptFormat format, double rate = 0.0) {
  GridOptions o;
  o.input_lens = {32};
  o.output_lens = {4};
  o.concurrencies = {2};
  o.prompt_format = format;
  o.request_rate = rate;
  o.seed = 7;
  return generate(o).value();
}

TEST(WorkloadIo, RoundTripTokensThroughAFile) {
  const auto requests = sample(PromptFormat::tokens, 5.0);
  const auto path = std::filesystem::temp_directory_path() / "kvprof_workload_io_test.jsonl";
  ASSERT_TRUE(write_workload(path, requests));
  const auto back = read_workload(path).value();
  std::filesystem::remove(path);
  ASSERT_EQ(back.size(), requests.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].request_id, requests[i].request_id);
    EXPECT_EQ(back[i].condition_id, requests[i].condition_id);
    EXPECT_EQ(back[i].prompt_token_ids, requests[i].prompt_token_ids);
    EXPECT_EQ(back[i].prefix_mode, requests[i].prefix_mode);
    EXPECT_EQ(back[i].prefix_len, requests[i].prefix_len);
    EXPECT_EQ(back[i].arrival, Arrival::poisson);
    EXPECT_NEAR(back[i].send_offset_s, requests[i].send_offset_s, 1e-6);
    EXPECT_EQ(back[i].max_tokens, 4u);
  }
}

TEST(WorkloadIo, RoundTripText) {
  const auto requests = sample(PromptFormat::text);
  std::stringstream ss;
  for (const auto& r : requests)
    ss << to_json_line(r) << "\r\n\n";  // CRLF and blank lines
  const auto back = read_workload(ss).value();
  ASSERT_EQ(back.size(), requests.size());
  EXPECT_EQ(back[0].prompt_format, PromptFormat::text);
  EXPECT_EQ(back[0].prompt_text, requests[0].prompt_text);
}

std::string error_of(const std::string& text) {
  std::stringstream ss(text);
  auto r = read_workload(ss);
  EXPECT_FALSE(r);
  return r ? std::string() : r.error().message;
}

const std::string k_good =
    R"({"request_id":0,"condition_id":"c","input_len":2,"output_len":3,"concurrency":1,)"
    R"("prefix_mode":"low","prompt":[1,2]})";

TEST(WorkloadIo, MinimalLineGetsDefaults) {
  std::stringstream ss(k_good);
  const auto r = read_workload(ss).value();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].max_tokens, 3u);
  EXPECT_TRUE(r[0].ignore_eos);
  EXPECT_EQ(r[0].arrival, Arrival::closed);
}

TEST(WorkloadIo, ErrorsNameTheLineAndField) {
  EXPECT_NE(error_of(k_good + "\nnot json\n").find("line 2"), std::string::npos);
  EXPECT_NE(error_of(R"({"request_id":0})").find("condition_id"), std::string::npos);
  std::string wrong_len = k_good;
  wrong_len.replace(wrong_len.find("[1,2]"), 5, "[1,2,3]");
  EXPECT_NE(error_of(wrong_len).find("3 token IDs"), std::string::npos);
  std::string negative = k_good;
  negative.replace(negative.find("[1,2]"), 5, "[1,-2]");
  EXPECT_NE(error_of(negative).find("token ID"), std::string::npos);
  std::string huge = k_good;
  huge.replace(huge.find("\"input_len\":2"), 13, "\"input_len\":99999999");
  EXPECT_NE(error_of(huge).find("input_len"), std::string::npos);
  EXPECT_NE(error_of(k_good + "\n" + k_good).find("appears twice"), std::string::npos);
  EXPECT_NE(error_of("").find("no requests"), std::string::npos);
  std::string mode = k_good;
  mode.replace(mode.find("\"low\""), 5, "\"mid\"");
  EXPECT_NE(error_of(mode).find("prefix mode"), std::string::npos);
}

TEST(WorkloadIo, OverlongLineIsRejectedWithoutReadingItWhole) {
  std::string line(k_max_line_bytes + 10, ' ');
  EXPECT_NE(error_of(line).find("longer than"), std::string::npos);
}

TEST(WorkloadIo, MissingFileIsAnIoError) {
  auto r = read_workload(std::filesystem::path("/nonexistent/kvprof/w.jsonl"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::io);
}

}  // namespace
}  // namespace kvprof::workload
