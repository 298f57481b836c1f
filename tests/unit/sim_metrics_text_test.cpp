// Tests for src/kvprof/sim/metrics_text.cpp: vLLM V1 names, labels, histogram shape.
#include "kvprof/sim/metrics_text.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <sstream>

namespace kvprof::sim {
namespace {

bool has_line(const std::string& page, const std::string& line) {
  std::istringstream in(page);
  for (std::string l; std::getline(in, l);) {
    if (l == line) return true;
  }
  return false;
}

TEST(SimMetricsText, RendersVllmNamesFromEngineState) {
  SimConfig c;
  c.model = "org/model";
  c.num_gpu_blocks = 200;
  EngineStats s;
  s.num_running = 3;
  s.num_waiting = 2;
  s.num_gpu_blocks = 200;
  s.num_used_blocks = 50;
  s.num_preemptions_total = 4;
  s.prefix_cache_queries_total = 1000;
  s.prefix_cache_hits_total = 640;
  s.generation_tokens_total = 77;
  s.ttft_bucket_counts[0] = 1;
  s.ttft_bucket_counts[3] = 2;
  s.ttft_bucket_counts[k_num_ttft_buckets] = 1;
  s.ttft_count = 4;
  s.ttft_sum_s = 3000.5;
  const std::string page = render_metrics(c, s);
  const std::string l = R"({engine="0",model_name="org/model"})";
  EXPECT_TRUE(has_line(page, "vllm:num_requests_running" + l + " 3.0")) << page;
  EXPECT_TRUE(has_line(page, "vllm:num_requests_waiting" + l + " 2.0"));
  EXPECT_TRUE(has_line(page, "vllm:kv_cache_usage_perc" + l + " 0.25"));
  EXPECT_TRUE(has_line(page, "vllm:num_preemptions_total" + l + " 4.0"));
  EXPECT_TRUE(has_line(page, "vllm:prefix_cache_queries_total" + l + " 1000.0"));
  EXPECT_TRUE(has_line(page, "vllm:prefix_cache_hits_total" + l + " 640.0"));
  EXPECT_TRUE(has_line(page, "vllm:generation_tokens_total" + l + " 77.0"));
  EXPECT_TRUE(has_line(page, "# TYPE vllm:num_preemptions_total counter"));
  EXPECT_TRUE(has_line(page, "# TYPE vllm:kv_cache_usage_perc gauge"));
  EXPECT_TRUE(has_line(page, "# TYPE vllm:time_to_first_token_seconds histogram"));
  // Cumulative buckets.
  EXPECT_TRUE(has_line(
      page,
      R"(vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="org/model"} 1.0)"));
  EXPECT_TRUE(has_line(
      page,
      R"(vllm:time_to_first_token_seconds_bucket{engine="0",le="0.02",model_name="org/model"} 3.0)"));
  EXPECT_TRUE(has_line(
      page,
      R"(vllm:time_to_first_token_seconds_bucket{engine="0",le="2560.0",model_name="org/model"} 3.0)"));
  EXPECT_TRUE(has_line(
      page,
      R"(vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="org/model"} 4.0)"));
  EXPECT_TRUE(has_line(page, "vllm:time_to_first_token_seconds_count" + l + " 4.0"));
  EXPECT_TRUE(has_line(page, "vllm:time_to_first_token_seconds_sum" + l + " 3000.5"));
  EXPECT_NE(page.find(R"(vllm:cache_config_info{block_size="16",)"), std::string::npos);
  EXPECT_NE(page.find(R"(num_gpu_blocks="200")"), std::string::npos);
  // Every sample line belongs to a declared metric family.
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#")) continue;
    const std::string name = line.substr(0, line.find('{'));
    std::string family = name;
    for (const char* suffix : {"_bucket", "_count", "_sum"}) {
      if (family.ends_with(suffix) && page.find("# TYPE " + name + " ") == std::string::npos) {
        family = family.substr(0, family.size() - std::string_view(suffix).size());
      }
    }
    EXPECT_NE(page.find("# TYPE " + family + " "), std::string::npos) << line;
  }
}

TEST(SimMetricsText, NumbersLookLikePrometheusClient) {
  EXPECT_EQ(prom_number(0), "0.0");
  EXPECT_EQ(prom_number(12), "12.0");
  EXPECT_EQ(prom_number(0.25), "0.25");
  EXPECT_EQ(prom_number(std::numeric_limits<double>::infinity()), "+Inf");
}

TEST(SimMetricsText, EscapesModelNameInLabels) {
  SimConfig c;
  c.model = "a\"b";
  const std::string page = render_metrics(c, EngineStats{});
  EXPECT_NE(page.find(R"(model_name="a\"b")"), std::string::npos);
}

}  // namespace
}  // namespace kvprof::sim
