// The profile's analysis on synthetic timelines: window statistics, seed 003's capture points,
// the measured breakdown with its confidence, KV growth fits and the comparison with a plan.
#include <gtest/gtest.h>

#include <cmath>

#include "kvprof/engines/registry.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/resolve.hpp"
#include "kvprof/profile/breakdown.hpp"
#include "kvprof/profile/timeline.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::profile {
namespace {

MetricsPoint scrape(int64_t t, double usage, std::optional<double> preemptions = std::nullopt) {
  MetricsPoint p;
  p.t_mono_ns = t;
  p.snapshot.kv_cache_usage = usage;
  p.snapshot.num_preemptions_total = preemptions;
  return p;
}

TEST(ProfileTimeline, MemoryWindowStatsPerGpu) {
  std::vector<MemoryPoint> pts = {
      {0, 0, 10, 100}, {10, 0, 30, 100}, {20, 0, 20, 100}, {10, 1, 7, 100}, {30, 0, 99, 100}};
  const auto s = memory_in(pts, {0, 30});
  ASSERT_EQ(s.size(), 2U);
  EXPECT_EQ(s[0].gpu, 0U);
  EXPECT_EQ(s[0].n_samples, 3U);
  EXPECT_EQ(s[0].min_used_bytes, 10U);
  EXPECT_EQ(s[0].max_used_bytes, 30U);
  EXPECT_EQ(s[0].mean_used_bytes, 20U);
  EXPECT_EQ(s[0].last_used_bytes, 20U);  // t=30 is outside [0, 30)
  EXPECT_EQ(s[1].max_used_bytes, 7U);
  EXPECT_TRUE(memory_in(pts, {100, 200}).empty());
}

TEST(ProfileTimeline, MetricsWindowPreemptionsCountFromBeforeTheWindow) {
  std::vector<MetricsPoint> pts = {scrape(0, 0.1, 5), scrape(10, 0.4, 7), scrape(20, 0.2, 9),
                                   scrape(30, 0.9, 20)};
  const auto s = metrics_in(pts, {5, 25});
  EXPECT_EQ(s.n_scrapes, 2U);
  EXPECT_DOUBLE_EQ(*s.peak_kv_cache_usage, 0.4);
  EXPECT_NEAR(*s.mean_kv_cache_usage, 0.3, 1e-12);
  EXPECT_DOUBLE_EQ(*s.preemptions, 4.0);  // 9 - 5 (the scrape before the window)
  const auto empty = metrics_in(pts, {100, 200});
  EXPECT_EQ(empty.n_scrapes, 0U);
  EXPECT_FALSE(empty.peak_kv_cache_usage);
  EXPECT_FALSE(empty.preemptions);
}

TEST(ProfileBreakdown, CapturePointStatsAcrossGpus) {
  std::vector<MemoryPoint> pts = {{0, 0, 10 * k_gib, {}},
                                  {1, 0, 12 * k_gib, {}},
                                  {0, 1, 20 * k_gib, {}},
                                  {1, 1, 20 * k_gib, {}}};
  const auto mean_point = capture_point("baseline", pts, {0, 2}, false);
  ASSERT_EQ(mean_point.used_bytes.size(), 2U);
  EXPECT_EQ(mean_point.used_bytes[0], 11 * k_gib);
  EXPECT_EQ(mean_point.sum_bytes, 31 * k_gib);
  EXPECT_EQ(mean_point.max_bytes, 20 * k_gib);
  EXPECT_DOUBLE_EQ(mean_point.mean_bytes, 15.5 * k_gib);
  EXPECT_DOUBLE_EQ(mean_point.stddev_bytes, 4.5 * k_gib);
  const auto peak = capture_point("peak", pts, {0, 2}, true);
  EXPECT_EQ(peak.sum_bytes, 32 * k_gib);
  EXPECT_TRUE(capture_point("x", pts, {5, 6}, true).empty());
}

TEST(ProfileBreakdown, PreallocatedPoolFromBlocksIsHighConfidence) {
  BreakdownInput in;
  in.baseline_bytes = 70 * k_gib;
  in.post_warmup_bytes = 70 * k_gib + (k_gib / 4);
  in.peak_bytes = 72 * k_gib;
  in.num_gpu_blocks = 1000;
  in.kv_bytes_per_block = 50 * (k_gib / 1000);
  in.fixed_overhead_bytes = 2 * k_gib;
  const auto b = measure_breakdown(in);
  EXPECT_EQ(*b.kv_cache.bytes, 1000 * (50 * (k_gib / 1000)));
  EXPECT_EQ(b.kv_cache.confidence, Confidence::high);
  EXPECT_EQ(*b.weights.bytes, 70 * k_gib - *b.kv_cache.bytes - 2 * k_gib);
  EXPECT_EQ(b.weights.confidence, Confidence::high);
  EXPECT_EQ(*b.activations.bytes, 72 * k_gib - (70 * k_gib + k_gib / 4));
  EXPECT_EQ(b.activations.confidence, Confidence::medium);
  // The components add up to the peak.
  EXPECT_EQ(*b.weights.bytes + *b.kv_cache.bytes + *b.activations.bytes + *b.overhead.bytes,
            72 * k_gib);
  EXPECT_EQ(b.overall, Confidence::high);
  EXPECT_EQ(b.total_measured_bytes, 72 * k_gib);
}

TEST(ProfileBreakdown, WithoutKvFiguresWeightsAreBaselineAndLowConfidence) {
  BreakdownInput in;
  in.baseline_bytes = 70 * k_gib;
  in.peak_bytes = 71 * k_gib;
  const auto b = measure_breakdown(in);
  EXPECT_FALSE(b.kv_cache.bytes);
  EXPECT_EQ(b.kv_cache.confidence, Confidence::none);
  EXPECT_EQ(*b.weights.bytes, 70 * k_gib);
  EXPECT_EQ(b.weights.confidence, Confidence::low);
  EXPECT_FALSE(b.activations.bytes);  // no post-warmup sample
  EXPECT_EQ(b.overall, Confidence::none);
}

TEST(ProfileBreakdown, OnDemandPoolFromGrowthIsSubtractedFromActivations) {
  BreakdownInput in;
  in.baseline_bytes = 10 * k_gib;
  in.post_warmup_bytes = 10 * k_gib;
  in.peak_bytes = 16 * k_gib;
  in.kv_growth_bytes_per_usage = 8.0 * k_gib;  // the full pool would be 8 GiB
  in.peak_kv_cache_usage = 0.5;
  in.post_warmup_kv_cache_usage = 0.0;
  const auto b = measure_breakdown(in);
  EXPECT_EQ(*b.kv_cache.bytes, 4 * k_gib);
  EXPECT_EQ(b.kv_cache.confidence, Confidence::medium);
  EXPECT_EQ(*b.weights.bytes, 10 * k_gib);  // nothing preallocated
  EXPECT_EQ(*b.activations.bytes, 2 * k_gib);
  EXPECT_EQ(*b.overhead.bytes, 0U);
}

TEST(ProfileBreakdown, KvGrowthFitFindsSlopeAndIgnoresFlatMemory) {
  std::vector<MemoryPoint> mem, flat;
  std::vector<MetricsPoint> scrapes;
  for (int i = 0; i < 20; ++i) {
    const double usage = i / 20.0;
    const auto used = static_cast<uint64_t>(5 * k_gib + usage * 4 * k_gib);
    mem.push_back({i * 100, 0, used, {}});
    flat.push_back({i * 100, 0, 5 * k_gib, {}});
    scrapes.push_back(scrape(i * 100 + 50, usage));
  }
  const auto slope = fit_kv_growth(mem, scrapes, 0, {0, 10000});
  ASSERT_TRUE(slope);
  EXPECT_NEAR(*slope, 4.0 * k_gib, 0.01 * k_gib);
  EXPECT_FALSE(fit_kv_growth(flat, scrapes, 0, {0, 10000}));
  EXPECT_FALSE(fit_kv_growth(mem, scrapes, 1, {0, 10000}));  // no samples of GPU 1
  EXPECT_FALSE(fit_kv_growth(mem, scrapes, 0, {0, 300}));    // too few points
}

TEST(ProfileBreakdown, ComparisonWithAPlanGivesSignedErrors) {
  estimate::EstimateInput in;
  in.model = *model::load_model("meta-llama/Llama-3.1-8B-Instruct");
  in.gpu = *gpu::find_gpu("H100");
  const auto est = engines::plan(in);
  ASSERT_TRUE(est.has_value());
  MeasuredBreakdown m;
  m.weights = {est->per_gpu.weights_bytes / 2, Confidence::high, ""};  // plan is 2x measured
  m.total_measured_bytes = est->per_gpu.total_bytes;
  MetricsWindowStats server;
  server.num_gpu_blocks = est->engine_report.num_gpu_blocks;
  const auto rows = compare_with_estimate(m, server, *est);
  ASSERT_GE(rows.size(), 6U);
  EXPECT_EQ(rows[0].name, "weights");
  EXPECT_NEAR(*rows[0].error_pct, 100.0, 1e-6);
  EXPECT_EQ(rows[1].name, "kv_cache");
  EXPECT_FALSE(rows[1].error_pct);  // not measured
  EXPECT_EQ(rows[4].name, "total");
  EXPECT_NEAR(*rows[4].error_pct, 0.0, 1e-9);
  EXPECT_EQ(rows[5].name, "num_gpu_blocks");
  EXPECT_NEAR(*rows[5].error_pct, 0.0, 1e-9);
}

}  // namespace
}  // namespace kvprof::profile
