// The plan of each modelled engine release against that release's public startups
// (tests/fixtures/{vllm,sglang,trtllm}_versions/*.jsonl, each record citing its log), held to
// the error budgets of the v0.19 calibration: weights within 1% each, KV cache within 6% at worst
// and 3% in the median, the default memory fraction as the release computes it. A release has one
// to three public startups, so the median is held over each engine's older releases together.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kvprof/analysis/startup_accuracy.hpp"

namespace kvprof::analysis {
namespace {

struct Budget {
  const char* file;  // under tests/fixtures/
  size_t records;
  double max_kv_pct = 6.0;  // available KV memory or KV tokens, worst record
};

class EngineVersionAccuracy : public ::testing::TestWithParam<Budget> {};

TEST_P(EngineVersionAccuracy, RecordsWithinBudget) {
  const Budget b = GetParam();
  auto results = run_startup_accuracy(std::string(KVPROF_FIXTURES_DIR "/") + b.file);
  ASSERT_TRUE(results.has_value()) << results.error().message;
  ASSERT_EQ(results->size(), b.records);
  for (const auto& r : *results) {
    ASSERT_TRUE(r.error.empty()) << r.id << ": " << r.error;
    bool has_kv = false;
    bool has_fraction = false;
    for (const auto& f : r.figures) {
      const double pct = f.error_pct();
      const auto said = [&] {
        return r.id + " " + f.figure + ": engine " + std::to_string(f.actual) + ", kvprof " +
               std::to_string(f.predicted);
      };
      if (f.figure == "weights_gib") {
        EXPECT_LE(pct, 1.0) << said();
      } else if (f.figure == "num_cpu_blocks") {
        EXPECT_LE(pct, 0.1) << said();
      } else if (f.figure == "memory_fraction") {
        // The engine reads nvidia-smi's total, a little above the usable memory kvprof holds.
        EXPECT_LE(pct, 0.5) << said();
        has_fraction = true;
      } else if (f.figure == "kv_cache_tokens" || f.figure == "num_gpu_blocks" ||
                 (f.figure == "kv_cache_gib" && !has_kv)) {
        EXPECT_LE(pct, b.max_kv_pct) << said();
        has_kv = true;
      }
    }
    // A startup whose KV pool was capped by a flag still shows the default fraction it chose.
    EXPECT_TRUE(has_kv || has_fraction) << r.id << " prints no KV cache figure";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Releases, EngineVersionAccuracy,
    ::testing::Values(
        Budget{"vllm_versions/v0.6.jsonl", 3}, Budget{"vllm_versions/v0.7.jsonl", 2},
        Budget{"vllm_versions/v0.8.jsonl", 1}, Budget{"vllm_versions/v0.8.5.jsonl", 3},
        Budget{"vllm_versions/v0.10.jsonl", 6}, Budget{"vllm_versions/v0.11.jsonl", 1},
        Budget{"vllm_versions/v0.15.jsonl", 2}, Budget{"vllm_versions/v0.17-v0.19.jsonl", 3},
        Budget{"sglang_versions/v0.3.jsonl", 3},
        // The one MI300X startup is 6.8% off: ROCm's memory in use before the
        // weights load is not modelled (docs/benchmarks.md).
        Budget{"sglang_versions/v0.4.jsonl", 4, 7.0}, Budget{"sglang_versions/v0.4.6.jsonl", 1},
        Budget{"sglang_versions/v0.4.7.post1.jsonl", 1},
        Budget{"sglang_versions/v0.4.9.post3.jsonl", 2}, Budget{"sglang_versions/v0.5.3.jsonl", 2},
        Budget{"trtllm_versions/1.x.jsonl", 2},
        // TGI's KV is what its warmup prefill leaves: an error in that prefill's peak is a larger
        // one in a small remainder (docs/benchmarks.md, "TGI"); the Gemma 3 startup's warmup
        // also runs its vision tower, which kvprof does not add.
        Budget{"tgi_versions/v2.jsonl", 3, 8.0}, Budget{"tgi_versions/v3.jsonl", 1, 16.0}),
    [](const ::testing::TestParamInfo<Budget>& p) {
      std::string n = p.param.file;
      for (auto& c : n)
        if (c == '.' || c == '/' || c == '-') c = '_';
      return n;
    });

// The KV error of the first KV figure of every record of `files`.
std::vector<double> kv_errors(std::initializer_list<const char*> files) {
  std::vector<double> out;
  for (const char* file : files) {
    auto results = run_startup_accuracy(std::string(KVPROF_FIXTURES_DIR "/") + file);
    EXPECT_TRUE(results.has_value()) << file;
    if (!results) continue;
    for (const auto& r : *results) {
      for (const auto& f : r.figures) {
        if (f.figure == "kv_cache_tokens" || f.figure == "kv_cache_gib" ||
            f.figure == "num_gpu_blocks") {
          out.push_back(f.error_pct());
          break;
        }
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(EngineVersionAccuracy, MedianKvErrorPerEngineWithinThreePercent) {
  const auto vllm = kv_errors({"vllm_versions/v0.6.jsonl", "vllm_versions/v0.7.jsonl",
                               "vllm_versions/v0.8.jsonl", "vllm_versions/v0.8.5.jsonl",
                               "vllm_versions/v0.10.jsonl", "vllm_versions/v0.11.jsonl",
                               "vllm_versions/v0.15.jsonl", "vllm_versions/v0.17-v0.19.jsonl"});
  const auto sglang =
      kv_errors({"sglang_versions/v0.3.jsonl", "sglang_versions/v0.4.jsonl",
                 "sglang_versions/v0.4.9.post3.jsonl", "sglang_versions/v0.5.3.jsonl"});
  const auto trtllm = kv_errors({"trtllm_versions/1.x.jsonl"});
  for (const auto* errors : {&vllm, &sglang, &trtllm}) {
    ASSERT_FALSE(errors->empty());
    EXPECT_LE((*errors)[(errors->size() - 1) / 2], 3.0);
  }
  EXPECT_EQ(vllm.size(), 21U);
  EXPECT_EQ(sglang.size(), 11U);
}

}  // namespace
}  // namespace kvprof::analysis
