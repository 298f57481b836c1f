// Tests for src/kvprof/workload/workload_io.cpp: round trips and clear errors on bad lines.
#include "kvprof/workload/workload_io.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kvprof/workload/prompt_hash.hpp"
#include "support/temp_dir.hpp"

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

// The compact file: the generator's settings and one SHA-256 per prompt.
class WorkloadCompact : public test::TempDirTest {
 protected:
  WorkloadCompact() : TempDirTest("kvprof_workload_compact") {}
};

// Every line of the compact file is a request (scripts that count or replay lines keep working);
// its generator is beside it, and without it the file says what is missing.
TEST_F(WorkloadCompact, EveryLineIsARequestAndTheGeneratorIsBesideIt) {
  GridOptions grid;
  grid.input_lens = {64};
  grid.output_lens = {8};
  grid.concurrencies = {1, 2};
  grid.prefix_modes = {PrefixMode::low};
  const auto requests = generate(grid).value();
  const auto path = m_dir / "w.jsonl";
  ASSERT_TRUE(write_generated_workload(path, grid, requests));
  EXPECT_EQ(generator_path(path), m_dir / "w.generator.json");
  ASSERT_TRUE(std::filesystem::exists(m_dir / "w.generator.json"));
  std::ifstream in(path);
  size_t lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const auto doc = nlohmann::json::parse(line);
    EXPECT_TRUE(doc.contains("request_id") && doc.contains("prompt_sha256")) << line;
  }
  EXPECT_EQ(lines, requests.size());
  ASSERT_EQ(read_workload(path).value().size(), requests.size());
  std::filesystem::remove(m_dir / "w.generator.json");
  const auto alone = read_workload(path);
  ASSERT_FALSE(alone);
  EXPECT_NE(alone.error().message.find("without its generator"), std::string::npos)
      << alone.error().message;
}

TEST_F(WorkloadCompact, DefaultGridFileIsSmallAndReadsBackTheSamePrompts) {
  const GridOptions grid;  // the default grid: 1440 requests, 27.5M prompt tokens
  const auto requests = generate(grid).value();
  const auto path = m_dir / "workload.jsonl";
  ASSERT_TRUE(write_generated_workload(path, grid, requests));
  // Measured: 444,989 bytes (157 MB with the prompts inline); see docs/benchmarks.md.
  EXPECT_LT(std::filesystem::file_size(path), 512u * 1024);
  const auto back = read_workload(path).value();
  ASSERT_EQ(back.size(), requests.size());
  for (size_t i = 0; i < back.size(); ++i) {
    ASSERT_EQ(back[i].request_id, requests[i].request_id);
    ASSERT_EQ(back[i].condition_id, requests[i].condition_id);
    ASSERT_EQ(back[i].prompt_token_ids, requests[i].prompt_token_ids) << i;
    ASSERT_EQ(prompt_sha256(back[i]), prompt_sha256(requests[i]));
    ASSERT_EQ(back[i].concurrency, requests[i].concurrency);
    ASSERT_EQ(back[i].max_tokens, requests[i].max_tokens);
  }
}

TEST_F(WorkloadCompact, TextPromptsAndPoissonArrivalsRoundTrip) {
  GridOptions grid;
  grid.input_lens = {40, 3};
  grid.output_lens = {5};
  grid.concurrencies = {1, 3};
  grid.prompt_format = PromptFormat::text;
  grid.request_rate = 4.0;
  grid.seed = 99;
  const auto requests = generate(grid).value();
  std::stringstream ss;
  ss << header_json_line(grid, requests.size()) << "\n";
  for (const auto& r : requests)
    ss << to_hashed_json_line(r) << "\r\n\n";
  const auto back = read_workload(ss).value();
  ASSERT_EQ(back.size(), requests.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].prompt_text, requests[i].prompt_text);
    EXPECT_EQ(back[i].arrival, Arrival::poisson);
    EXPECT_NEAR(back[i].send_offset_s, requests[i].send_offset_s, 1e-6);
  }
}

// A small compact file as text, for the tests that break it.
std::string small_compact(uint64_t seed = 5) {
  GridOptions grid;
  grid.input_lens = {16};
  grid.output_lens = {2};
  grid.concurrencies = {2};
  grid.seed = seed;
  const auto requests = generate(grid).value();
  std::string text = header_json_line(grid, requests.size()) + "\n";
  for (const auto& r : requests)
    text += to_hashed_json_line(r) + "\n";
  return text;
}

TEST_F(WorkloadCompact, AHashThatDoesNotMatchNamesTheLine) {
  std::string text = small_compact();
  const auto at = text.find("\"prompt_sha256\":\"") + 17;
  text[at] = text[at] == '0' ? '1' : '0';
  EXPECT_NE(error_of(text).find("line 2: the prompt generated for request 0 does not match"),
            std::string::npos);
  // The lines of another seed's file under this header: every prompt differs.
  std::string other = small_compact(6);
  const std::string mixed = small_compact().substr(0, small_compact().find('\n') + 1) +
                            other.substr(other.find('\n') + 1);
  EXPECT_NE(error_of(mixed).find("does not match its prompt_sha256"), std::string::npos);
}

TEST_F(WorkloadCompact, BadHeadersAreClearErrors) {
  std::string text = small_compact();
  std::string version = text;
  version.replace(version.find("\"kvprof_workload\":2"), 19, "\"kvprof_workload\":9");
  EXPECT_NE(error_of(version).find("workload format 9"), std::string::npos);
  std::string generator = text;
  generator.replace(generator.find("\"version\":1"), 11, "\"version\":7");
  EXPECT_NE(error_of(generator).find("generator version 7"), std::string::npos);
  std::string lens = text;
  lens.replace(lens.find("\"input_lens\":[16]"), 17, "\"input_lens\":[0]");
  EXPECT_NE(error_of(lens).find("'input_lens'"), std::string::npos);
  std::string id = text;
  id.replace(id.find("\"request_id\":1"), 14, "\"request_id\":7");
  EXPECT_NE(error_of(id).find("request_id 7 is not one the generator makes"), std::string::npos);
  std::string hash = text;
  hash.replace(hash.find("\"prompt_sha256\":\""), 17, "\"prompt_sha256\":\"zz");
  EXPECT_NE(error_of(hash).find("64 lower-case hex digits"), std::string::npos);
  // A header whose generator would make more prompt tokens than the reader allows.
  std::stringstream big(text);
  auto r = read_workload(big, 10);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("would make 64 prompt tokens (at most 10)"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace kvprof::workload
