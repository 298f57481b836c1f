#include "kvprof/metrics/snapshot.hpp"

#include <gtest/gtest.h>

#include "kvprof/engines/registry.hpp"
#include "support/test_data.hpp"

namespace kvprof::metrics {
namespace {

MetricsSnapshot snapshot_of(std::string_view text) {
  auto expo = parse_prometheus_text(text);
  EXPECT_TRUE(expo.has_value()) << (expo ? "" : expo.error().message);
  return expo ? engines::read_metrics(*expo) : MetricsSnapshot{};
}

TEST(MetricsSnapshot, VllmV1Fixture) {
  const auto s = snapshot_of(test::read_fixture("prometheus/vllm_v1.txt"));
  EXPECT_EQ(s.engine, engines::Engine::vllm);
  EXPECT_EQ(engines::engine_name(s.engine), "vllm");
  EXPECT_DOUBLE_EQ(s.kv_cache_usage.value(), 0.4375);
  EXPECT_EQ(s.num_requests_running.value(), 7.0);
  EXPECT_EQ(s.num_requests_waiting.value(), 2.0);
  EXPECT_EQ(s.num_preemptions_total.value(), 3.0);
  EXPECT_EQ(s.prefix_cache_queries_total.value(), 48213.0);
  EXPECT_EQ(s.prefix_cache_hits_total.value(), 12032.0);
  EXPECT_EQ(s.prompt_tokens_total.value(), 48213.0);
  EXPECT_EQ(s.generation_tokens_total.value(), 9160.0);
  EXPECT_EQ(s.num_gpu_blocks.value(), 27153U);
  EXPECT_EQ(s.block_size_tokens.value(), 16U);
  EXPECT_EQ(s.kv_cache_capacity_tokens.value(), 27153U * 16U);
  // vLLM does not report these: they stay absent, not 0.
  EXPECT_FALSE(s.kv_cache_used_tokens.has_value());
  EXPECT_FALSE(s.num_retracted_reqs.has_value());
  EXPECT_FALSE(s.batch_max_tokens.has_value());
  EXPECT_FALSE(s.slots_busy.has_value());
}

TEST(MetricsSnapshot, VllmLegacyNamesAndSeveralEngines) {
  // An older vLLM (gpu_cache_usage_perc, gpu_prefix_cache_*) with data parallelism: counts add
  // up over the engine label, the usage fraction is the mean.
  const auto s = snapshot_of(
      "# TYPE vllm:gpu_cache_usage_perc gauge\n"
      "vllm:gpu_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n"
      "vllm:gpu_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.75\n"
      "# TYPE vllm:num_requests_running gauge\n"
      "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n"
      "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 4\n"
      "# TYPE vllm:gpu_prefix_cache_queries_total counter\n"
      "vllm:gpu_prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} 100\n"
      "vllm:gpu_prefix_cache_queries_total{engine=\"1\",model_name=\"m\"} 50\n"
      "# TYPE vllm:cache_config_info gauge\n"
      "vllm:cache_config_info{block_size=\"32\",engine=\"0\",num_gpu_blocks=\"1000\"} 1\n"
      "vllm:cache_config_info{block_size=\"32\",engine=\"1\",num_gpu_blocks=\"900\"} 1\n");
  EXPECT_EQ(s.engine, engines::Engine::vllm);
  EXPECT_DOUBLE_EQ(s.kv_cache_usage.value(), 0.5);
  EXPECT_EQ(s.num_requests_running.value(), 7.0);
  EXPECT_EQ(s.prefix_cache_queries_total.value(), 150.0);
  EXPECT_FALSE(s.prefix_cache_hits_total.has_value());
  EXPECT_FALSE(s.num_requests_waiting.has_value());
  EXPECT_EQ(s.num_gpu_blocks.value(), 1900U);
  EXPECT_EQ(s.kv_cache_capacity_tokens.value(), 1900U * 32U);
}

TEST(MetricsSnapshot, VllmNewNameWinsOverLegacy) {
  const auto s = snapshot_of(
      "vllm:kv_cache_usage_perc{engine=\"0\"} 0.9\n"
      "vllm:gpu_cache_usage_perc{engine=\"0\"} 0.1\n");
  EXPECT_DOUBLE_EQ(s.kv_cache_usage.value(), 0.9);
}

TEST(MetricsSnapshot, CacheConfigInfoWithoutBlocksYet) {
  const auto s = snapshot_of(
      "vllm:cache_config_info{block_size=\"16\",engine=\"0\",num_gpu_blocks=\"None\"} 1\n");
  EXPECT_EQ(s.block_size_tokens.value(), 16U);
  EXPECT_FALSE(s.num_gpu_blocks.has_value());
  EXPECT_FALSE(s.kv_cache_capacity_tokens.has_value());
}

TEST(MetricsSnapshot, NanSamplesAreIgnored) {
  const auto s = snapshot_of("llamacpp:kv_cache_usage_ratio NaN\nllamacpp:requests_processing 0\n");
  EXPECT_EQ(s.engine, engines::Engine::llamacpp);
  EXPECT_FALSE(s.kv_cache_usage.has_value());
  EXPECT_EQ(s.num_requests_running.value(), 0.0);  // a reported 0 stays 0
}

TEST(MetricsSnapshot, ImpossibleValuesAreLeftOutAndCounted) {
  // A lying server: a negative KV share ("KV peak -350%"), a share over 100%, negative gauges.
  const char* text =
      "vllm:kv_cache_usage_perc -3.5\n"
      "vllm:num_requests_running -4\n"
      "vllm:num_requests_waiting 2\n"
      "vllm:num_preemptions_total -1\n";
  const auto s = snapshot_of(text);
  EXPECT_EQ(s.engine, engines::Engine::vllm);
  EXPECT_FALSE(s.kv_cache_usage.has_value());
  EXPECT_FALSE(s.num_requests_running.has_value());
  EXPECT_FALSE(s.num_preemptions_total.has_value());
  EXPECT_EQ(s.num_requests_waiting.value(), 2.0);
  auto expo = parse_prometheus_text(text, {});
  ASSERT_TRUE(expo.has_value());
  EXPECT_EQ(count_impossible_values(*expo), 3U);

  const auto over = snapshot_of("vllm:kv_cache_usage_perc 1.7\nvllm:num_requests_running 1\n");
  EXPECT_FALSE(over.kv_cache_usage.has_value());
  expo = parse_prometheus_text("vllm:kv_cache_usage_perc 1.7\n", {});
  ASSERT_TRUE(expo.has_value());
  EXPECT_EQ(count_impossible_values(*expo), 1U);
  expo = parse_prometheus_text("vllm:kv_cache_usage_perc 1.0\nvllm:num_requests_running 0\n", {});
  ASSERT_TRUE(expo.has_value());
  EXPECT_EQ(count_impossible_values(*expo), 0U);
}

TEST(MetricsSnapshot, SglangFixtureSumsOverDpRanks) {
  const auto s = snapshot_of(test::read_fixture("prometheus/sglang.txt"));
  EXPECT_EQ(s.engine, engines::Engine::sglang);
  EXPECT_DOUBLE_EQ(s.kv_cache_usage.value(), 0.4);
  EXPECT_EQ(s.kv_cache_used_tokens.value(), 61440.0 + 36864.0);
  EXPECT_EQ(s.kv_cache_capacity_tokens.value(), 2U * 122880U);
  EXPECT_EQ(s.num_requests_running.value(), 8.0);
  EXPECT_EQ(s.num_requests_waiting.value(), 4.0);
  EXPECT_EQ(s.num_retracted_reqs.value(), 1.0);
  EXPECT_EQ(s.num_preemptions_total.value(), 8.0);
  EXPECT_EQ(s.prompt_tokens_total.value(), 201533.0);
  EXPECT_EQ(s.generation_tokens_total.value(), 48120.0);
  EXPECT_FALSE(s.num_gpu_blocks.has_value());
  EXPECT_FALSE(s.prefix_cache_hits_total.has_value());
}

TEST(MetricsSnapshot, TgiFixture) {
  const auto s = snapshot_of(test::read_fixture("prometheus/tgi.txt"));
  EXPECT_EQ(s.engine, engines::Engine::tgi);
  EXPECT_EQ(s.num_requests_waiting.value(), 3.0);
  EXPECT_EQ(s.num_requests_running.value(), 12.0);
  EXPECT_EQ(s.batch_max_tokens.value(), 18432.0);
  EXPECT_FALSE(s.kv_cache_usage.has_value());
  EXPECT_FALSE(s.prompt_tokens_total.has_value());
}

TEST(MetricsSnapshot, LlamacppFixture) {
  const auto s = snapshot_of(test::read_fixture("prometheus/llamacpp.txt"));
  EXPECT_EQ(s.engine, engines::Engine::llamacpp);
  EXPECT_DOUBLE_EQ(s.kv_cache_usage.value(), 0.125);
  EXPECT_EQ(s.kv_cache_used_tokens.value(), 1024.0);
  EXPECT_EQ(s.num_requests_running.value(), 2.0);
  EXPECT_EQ(s.num_requests_waiting.value(), 1.0);
  EXPECT_EQ(s.prompt_tokens_total.value(), 6886.0);
  EXPECT_EQ(s.generation_tokens_total.value(), 3469.0);
  EXPECT_FALSE(s.kv_cache_capacity_tokens.has_value());
}

TEST(MetricsSnapshot, UnknownServerHasNoFields) {
  const auto s = snapshot_of("process_cpu_seconds_total 12\ngo_goroutines 40\n");
  EXPECT_EQ(s.engine, engines::Engine::unknown);
  EXPECT_FALSE(s.kv_cache_usage.has_value());
  EXPECT_FALSE(s.num_requests_running.has_value());
}

TEST(MetricsSnapshot, EngineGuessCountsFamilies) {
  // A vLLM behind a router that adds one tgi_ metric is still vLLM.
  const auto expo = parse_prometheus_text("tgi_queue_size 1\nvllm:a 1\nvllm:b 2\n");
  ASSERT_TRUE(expo.has_value());
  EXPECT_EQ(guess_engine(*expo), engines::Engine::vllm);
}

TEST(LlamacppSlots, FixtureCountsBusySlots) {
  const auto slots = parse_llamacpp_slots(test::read_fixture("prometheus/llamacpp_slots.json"));
  ASSERT_TRUE(slots.has_value()) << slots.error().message;
  EXPECT_EQ(slots->slots_total, 4U);
  EXPECT_EQ(slots->slots_busy, 2U);
  EXPECT_EQ(slots->n_ctx_total_tokens, 4U * 4096U);
}

TEST(LlamacppSlots, OlderStateFieldAndErrors) {
  const auto old = parse_llamacpp_slots(R"([{"id":0,"n_ctx":2048,"state":1},{"id":1,"state":0}])");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->slots_busy, 1U);
  EXPECT_EQ(old->slots_total, 2U);
  EXPECT_EQ(old->n_ctx_total_tokens, 2048U);
  EXPECT_FALSE(parse_llamacpp_slots("{\"id\":0}").has_value());
  EXPECT_FALSE(parse_llamacpp_slots("[1,2]").has_value());
  EXPECT_FALSE(parse_llamacpp_slots("[{\"id\":0}]").has_value());
  EXPECT_FALSE(parse_llamacpp_slots("[{\"is_processing\":tru").has_value());
  EXPECT_EQ(parse_llamacpp_slots("[]").value().slots_total, 0U);
}

TEST(LlamacppSlots, KvTokensOfBusySlotsFromCurrentAndOlderShapes) {
  // Current llama-server: n_prompt_tokens + next_token[0].n_decoded; idle slots (whose cached
  // prompt is free for reuse) do not count.
  const auto current = parse_llamacpp_slots(R"([
    {"id":0,"n_ctx":512,"is_processing":true,"n_prompt_tokens":100,
     "next_token":[{"has_next_token":true,"n_remain":10,"n_decoded":7}]},
    {"id":1,"n_ctx":512,"is_processing":false,"n_prompt_tokens":300,
     "next_token":[{"n_decoded":20}]}])");
  ASSERT_TRUE(current.has_value()) << current.error().message;
  ASSERT_TRUE(current->kv_used_tokens.has_value());
  EXPECT_EQ(*current->kv_used_tokens, 107U);
  EXPECT_EQ(current->n_ctx_total_tokens, 1024U);
  // kvprof serve (and some llama-server versions) send n_past, which wins.
  const auto past = parse_llamacpp_slots(
      R"([{"id":0,"n_ctx":256,"is_processing":true,"n_past":42,"n_prompt_tokens":30}])");
  ASSERT_TRUE(past.has_value());
  EXPECT_EQ(past->kv_used_tokens, std::optional<uint64_t>(42));
  // Older servers say nothing about tokens: no KV figure, never a made-up 0.
  const auto fixture = parse_llamacpp_slots(test::read_fixture("prometheus/llamacpp_slots.json"));
  ASSERT_TRUE(fixture.has_value());
  EXPECT_FALSE(fixture->kv_used_tokens.has_value());
}

}  // namespace
}  // namespace kvprof::metrics
