// The vLLM profile against 29 real vLLM v0.19 H100 startups (tests/fixtures, from
// shared/data): the error budgets of the estimate issue.
#include "kvprof/analysis/startup_accuracy.hpp"

#include <gtest/gtest.h>

#include <fstream>

namespace kvprof::analysis {
namespace {

class VllmAccuracy : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto r = run_startup_accuracy(KVPROF_FIXTURES_DIR "/vllm_startup_public.jsonl");
    ASSERT_TRUE(r.has_value()) << r.error().message;
    s_results = new std::vector<RecordResult>(std::move(*r));
    s_summary = new std::vector<FigureSummary>(summarize(*s_results));
  }
  static void TearDownTestSuite() {
    delete s_results;
    delete s_summary;
  }
  static inline std::vector<RecordResult>* s_results = nullptr;
  static inline std::vector<FigureSummary>* s_summary = nullptr;
};

TEST_F(VllmAccuracy, EveryRecordRuns) {
  ASSERT_EQ(s_results->size(), 29U);
  for (const auto& r : *s_results)
    EXPECT_TRUE(r.error.empty()) << r.id << ": " << r.error;
}

TEST_F(VllmAccuracy, WeightsWithinOnePercentEach) {
  for (const auto& r : *s_results) {
    for (const auto& f : r.figures) {
      if (f.figure == "weights_gib") {
        EXPECT_LE(f.error_pct(), 1.0)
            << r.id << " " << r.model << ": vLLM " << f.actual << " GiB, kvprof " << f.predicted;
      }
    }
  }
}

TEST_F(VllmAccuracy, KvCacheTokensMedianAndMax) {
  const auto s = find_summary(*s_summary, "kv_cache_tokens");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->n, 29U);
  EXPECT_LE(s->median_pct, 3.0);
  EXPECT_LE(s->max_pct, 6.0) << "worst: " << s->worst_record;
}

TEST_F(VllmAccuracy, MaxConcurrencyMedian) {
  const auto s = find_summary(*s_summary, "max_concurrency");
  ASSERT_TRUE(s.has_value());
  EXPECT_LE(s->median_pct, 3.0);
}

TEST(VllmAccuracyInput, MalformedLineIsAnInputError) {
  const auto path = std::filesystem::temp_directory_path() / "kvprof_bad_records.jsonl";
  {
    std::ofstream out(path);
    out << "{\"id\": \"x\"}\nnot json\n";
  }
  auto r = run_startup_accuracy(path);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, ErrorKind::input);
  EXPECT_NE(r.error().message.find(":2:"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(VllmAccuracyInput, MissingFileIsAnIoError) {
  auto r = run_startup_accuracy("/nonexistent/records.jsonl");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, ErrorKind::io);
}

}  // namespace
}  // namespace kvprof::analysis
