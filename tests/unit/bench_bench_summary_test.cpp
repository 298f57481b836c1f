// Tests for src/kvprof/bench/bench_summary.cpp: what a bench interrupted early writes for the
// conditions it did not measure — null in summary.json and "-" in the table, never 0.
#include "kvprof/bench/bench_summary.hpp"

#include <gtest/gtest.h>

#include <string>

namespace kvprof::bench {
namespace {

TEST(BenchReportSummary, UnmeasuredIsNullAndDashNeverZero) {
  BenchConfig config;
  config.engine.model_path = "/nonexistent/model.gguf";
  BenchReport r;
  r.run_id = "r";
  r.status = "interrupted";
  ConditionResult cut;  // started, cut short before its first token
  cut.condition.label = "c4 p128";
  cut.condition.concurrency = 4;
  cut.started = true;
  cut.n_ctx = 768;
  r.conditions.push_back(cut);
  ConditionResult never;  // never started
  never.condition.index = 1;
  never.condition.label = "c8 p128";
  never.condition.concurrency = 8;
  r.conditions.push_back(never);

  const auto s = summary_json(config, r);
  for (const auto& c : s.at("conditions")) {
    EXPECT_TRUE(c.at("output_tokens_per_s").is_null()) << c.at("condition_id");
    EXPECT_TRUE(c.at("mean_tokens_per_second_per_request").is_null());
    EXPECT_TRUE(c.at("llama_cpp_share_of_wall").is_null());
    for (const char* k : {"ttft_ms", "itl_ms", "e2e_ms"}) {
      const auto& p = c.at(k);
      EXPECT_EQ(p.at("n"), 0);
      EXPECT_TRUE(p.at("p50").is_null()) << k;
      EXPECT_TRUE(p.at("max").is_null()) << k;
    }
  }
  const std::string text = summary_text(config, r);
  const auto row = text.substr(text.find("c4 p128 (cut short)"));
  const auto line = row.substr(0, row.find('\n'));
  EXPECT_EQ(line.find(" 0.0 "), std::string::npos) << line;
  EXPECT_NE(line.find(" - "), std::string::npos) << line;
  EXPECT_EQ(text.find("c8 p128"), std::string::npos) << text;  // never started: no row
}

}  // namespace
}  // namespace kvprof::bench
