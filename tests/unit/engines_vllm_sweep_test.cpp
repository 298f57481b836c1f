// The vLLM sweep against the full plan(): every figure of every configuration equal, over
// dense, GQA, MLA, sliding-window, hybrid SSM, quantized and MoE catalog models.
#include "kvprof/engines/vllm/sweep.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "kvprof/engines/registry.hpp"
#include "kvprof/model/catalog.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner the engines build on

namespace {

struct Case {
  const char* model_id;
  const char* draft_id = nullptr;
  KvCacheDtype kv_cache_dtype = KvCacheDtype::auto_;
  bool enforce_eager = false;
  std::optional<uint32_t> block_size = std::nullopt;
};

EstimateInput base_input(const Case& c) {
  EstimateInput in;
  in.model = model::catalog_model(c.model_id).value();
  if (c.draft_id) {
    in.draft = model::catalog_model(c.draft_id).value();
    in.settings.num_speculative_tokens = 4;
    in.settings.spec_runtime_control = true;
  }
  in.settings.kv_cache_dtype = c.kv_cache_dtype;
  in.settings.enforce_eager = c.enforce_eager;
  in.settings.block_size = c.block_size;
  return in;
}

std::vector<gpu::GpuSpec> gpus(std::initializer_list<const char*> names) {
  std::vector<gpu::GpuSpec> out;
  for (const char* n : names)
    out.push_back(gpu::find_gpu(n).value());
  return out;
}

// The plan() input a sweep point stands for, built by hand from the point's values.
EstimateInput point_input(const EstimateInput& base, const VllmSweep& sweep, const SweepPoint& p,
                          const std::vector<uint64_t>& contexts,
                          const std::vector<uint32_t>& concurrency) {
  EstimateInput in = base;
  in.gpu = sweep.gpus()[p.gpu_index];
  in.settings.tensor_parallel_size = sweep.splits()[p.split_index].tp;
  in.settings.pipeline_parallel_size = sweep.splits()[p.split_index].pp;
  if (p.gpu_memory_utilization > 0) in.settings.gpu_memory_utilization = p.gpu_memory_utilization;
  if (p.max_model_len > 0) in.settings.max_model_len = p.max_model_len;
  if (p.max_num_seqs > 0) in.settings.max_num_seqs = p.max_num_seqs;
  if (p.max_num_batched_tokens > 0) in.settings.max_num_batched_tokens = p.max_num_batched_tokens;
  in.workload.context_tokens = contexts;
  in.workload.concurrency = concurrency;
  return in;
}

void expect_budget_equal(const SweepResult& r, const Estimate& est, const std::string& where) {
  ASSERT_TRUE(r.valid) << where;
  EXPECT_EQ(r.weights_bytes, est.per_gpu.weights_bytes) << where;
  EXPECT_EQ(r.kv_cache_bytes, est.per_gpu.kv_cache_bytes) << where;
  EXPECT_EQ(r.num_gpu_blocks, est.engine_report.num_gpu_blocks) << where;
  EXPECT_EQ(r.kv_cache_tokens, est.engine_report.kv_cache_tokens) << where;
  EXPECT_EQ(r.max_concurrency, est.engine_report.max_concurrency) << where;
  EXPECT_EQ(r.total_bytes, est.per_gpu.total_bytes) << where;
  EXPECT_EQ(r.headroom_bytes, est.headroom_bytes) << where;
}

// Every outer configuration of the grid against one plan() whose workload holds all the
// (context, concurrency) rows, and each configuration's verdict against an plan() of that
// single row (one rotating row per outer configuration keeps the test fast).
void check_model(const Case& c, const std::vector<gpu::GpuSpec>& gpu_list,
                 const std::vector<SweepSplit>& splits) {
  const EstimateInput base = base_input(c);
  const auto sweep = VllmSweep::create(base, gpu_list, splits);
  ASSERT_TRUE(sweep.has_value()) << c.model_id << ": " << sweep.error().message;
  SweepGrid grid;
  grid.gpu_memory_utilizations = {0, 0.5, 0.95};
  grid.max_model_lens = {0, 4096, 32768};
  grid.max_num_batched_tokens = {0, 2048};
  grid.max_num_seqs = {0, 64};
  const std::vector<uint64_t> contexts = {1000, 4096, 200000};
  const std::vector<uint32_t> concurrency = {1, 7, 256};
  uint64_t checked = 0;
  uint64_t valid = 0;
  size_t rotate = 0;
  grid.context_tokens = {0};
  sweep->for_each(grid, [&](const SweepPoint& outer, const SweepResult&) {
    const std::string where =
        std::string(c.model_id) + " gpu " + sweep->gpus()[outer.gpu_index].id + " tp " +
        std::to_string(sweep->splits()[outer.split_index].tp) + " pp " +
        std::to_string(sweep->splits()[outer.split_index].pp) + " util " +
        std::to_string(outer.gpu_memory_utilization) + " len " +
        std::to_string(outer.max_model_len) + " mnbt " +
        std::to_string(outer.max_num_batched_tokens) + " mns " + std::to_string(outer.max_num_seqs);
    const auto full = plan(point_input(base, *sweep, outer, contexts, concurrency));
    size_t row = 0;
    for (const uint64_t ctx : contexts) {
      for (const uint32_t conc : concurrency) {
        SweepPoint p = outer;
        p.context_tokens = ctx;
        p.concurrency = conc;
        const SweepResult r = sweep->evaluate(p);
        ++checked;
        if (!full) {
          EXPECT_FALSE(r.valid) << where;
          continue;
        }
        ++valid;
        const std::string at = where + " ctx " + std::to_string(ctx) + " x" + std::to_string(conc);
        expect_budget_equal(r, *full, at);
        EXPECT_EQ(r.kv_needed_bytes, full->rows.at(row).kv_needed_bytes) << at;
        EXPECT_EQ(r.row_verdict, full->rows.at(row).verdict) << at;
        ++row;
      }
    }
    if (!full) return;
    // Context 0 stands for max_model_len: plan()'s default workload row.
    SweepPoint p = outer;
    const size_t n_contexts = contexts.size() + 1;
    p.context_tokens = rotate % n_contexts == 0 ? 0 : contexts[rotate % n_contexts - 1];
    p.concurrency =
        p.context_tokens == 0 ? 1 : concurrency[(rotate / n_contexts) % concurrency.size()];
    ++rotate;
    std::vector<uint64_t> single_contexts;
    std::vector<uint32_t> single_concurrency;
    if (p.context_tokens > 0) {
      single_contexts = {p.context_tokens};
      single_concurrency = {p.concurrency};
    }
    const auto single =
        plan(point_input(base, *sweep, outer, single_contexts, single_concurrency)).value();
    const SweepResult r = sweep->evaluate(p);
    expect_budget_equal(r, single, where);
    ASSERT_EQ(single.rows.size(), 1U);
    EXPECT_EQ(r.kv_needed_bytes, single.rows[0].kv_needed_bytes) << where << " default row";
    EXPECT_EQ(r.verdict, single.verdict) << where << " ctx " << p.context_tokens;
  });
  EXPECT_EQ(checked, sweep->grid_size(grid) * contexts.size() * concurrency.size());
  EXPECT_GT(valid, 0U) << c.model_id;
}

const std::vector<SweepSplit> k_splits = {{1, 1}, {2, 1}, {4, 1}, {8, 1}, {2, 2}};

TEST(EstimateSweep, DenseLlamaEqualsFullEstimate) {
  check_model({.model_id = "meta-llama/Llama-3.1-8B-Instruct"},
              gpus({"L4", "A100-SXM4-80GB", "H100", "H200"}), k_splits);
}

TEST(EstimateSweep, GqaQwenEqualsFullEstimateAndTp8IsInvalid) {
  // 28 heads: TP 8 does not divide them, so plan() fails and the sweep marks it invalid.
  check_model({.model_id = "Qwen/Qwen2.5-7B-Instruct"}, gpus({"L40S", "H100"}), k_splits);
}

TEST(EstimateSweep, MlaDeepSeekV2LiteEqualsFullEstimate) {
  check_model({.model_id = "deepseek-ai/DeepSeek-V2-Lite"}, gpus({"A100-SXM4-40GB", "H100"}),
              k_splits);
}

TEST(EstimateSweep, SlidingWindowGemmaEqualsFullEstimate) {
  check_model({.model_id = "google/gemma-2-27b-it"}, gpus({"H100", "B200"}), k_splits);
  check_model({.model_id = "google/gemma-3-12b-it"}, gpus({"L4", "H100"}), k_splits);
}

TEST(EstimateSweep, HybridSsmEqualsFullEstimate) {
  check_model({.model_id = "ai21labs/AI21-Jamba-1.5-Mini"}, gpus({"H100", "H200"}), k_splits);
  check_model({.model_id = "Qwen/Qwen3-Next-80B-A3B-Instruct"}, gpus({"H100", "MI300X"}), k_splits);
  // A chosen block size is not enlarged to the mamba page.
  check_model({.model_id = "ai21labs/AI21-Jamba-1.5-Mini", .block_size = 64}, gpus({"H200"}),
              {{1, 1}, {2, 1}});
}

TEST(EstimateSweep, QuantizedCheckpointsEqualFullEstimate) {
  check_model({.model_id = "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"},
              gpus({"L4", "H100"}), k_splits);
  check_model({.model_id = "openai/gpt-oss-20b"}, gpus({"L40S", "H100"}), k_splits);
}

TEST(EstimateSweep, MoeEqualsFullEstimate) {
  check_model({.model_id = "mistralai/Mixtral-8x7B-v0.1"}, gpus({"A100-SXM4-80GB", "H100", "H200"}),
              k_splits);
}

TEST(EstimateSweep, Fp8KvEagerAndSpeculativeDraftEqualFullEstimate) {
  check_model({.model_id = "meta-llama/Llama-3.1-8B-Instruct",
               .kv_cache_dtype = KvCacheDtype::fp8_e4m3,
               .enforce_eager = true},
              gpus({"L4", "H100"}), k_splits);
  check_model({.model_id = "meta-llama/Llama-3.1-8B-Instruct",
               .draft_id = "meta-llama/Llama-3.2-1B-Instruct"},
              gpus({"H100"}), k_splits);
}

TEST(EstimateSweep, ForEachVisitsTheGridAsEvaluateDoes) {
  const EstimateInput base = base_input({.model_id = "google/gemma-2-9b-it"});
  const auto sweep = VllmSweep::create(base, gpus({"L4", "H100"}), k_splits).value();
  SweepGrid grid;
  grid.gpu_memory_utilizations = {0.8, 0.9};
  grid.max_model_lens = {4096, 8192};
  grid.context_tokens = {512, 8192, 9000};
  grid.concurrency = {1, 16, 128};
  uint64_t n = 0;
  uint64_t fits = 0;
  uint64_t oom = 0;
  const uint64_t visited = sweep.for_each(grid, [&](const SweepPoint& p, const SweepResult& r) {
    const SweepResult again = sweep.evaluate(p);
    EXPECT_EQ(r.valid, again.valid);
    EXPECT_EQ(r.kv_cache_bytes, again.kv_cache_bytes);
    EXPECT_EQ(r.kv_needed_bytes, again.kv_needed_bytes);
    EXPECT_EQ(r.verdict, again.verdict);
    fits += r.valid && r.verdict == Verdict::fits ? 1 : 0;
    oom += r.valid && r.verdict >= Verdict::rejected ? 1 : 0;
    ++n;
  });
  EXPECT_EQ(visited, n);
  EXPECT_EQ(n, 2U * 5 * 2 * 2 * 3 * 3);
  EXPECT_EQ(sweep.grid_size(grid), n);
  // The grid spans both answers: contexts over max_model_len and L4 at long lengths do not fit.
  EXPECT_GT(fits, 0U);
  EXPECT_GT(oom, 0U);
}

TEST(EstimateSweep, InvalidSettingsAreInvalidPoints) {
  const EstimateInput base = base_input({.model_id = "meta-llama/Llama-3.1-8B-Instruct"});
  const auto sweep = VllmSweep::create(base, gpus({"H100"}), {{1, 1}, {3, 1}}).value();
  SweepPoint p;
  p.gpu_memory_utilization = 1.5;
  EXPECT_FALSE(sweep.evaluate(p).valid);
  p.gpu_memory_utilization = 0.9;
  EXPECT_TRUE(sweep.evaluate(p).valid);
  p.split_index = 1;  // TP 3 does not divide 32 heads
  EXPECT_FALSE(sweep.evaluate(p).valid);
}

TEST(EstimateSweep, CreateRefusesWhatEstimateRefuses) {
  EstimateInput base = base_input({.model_id = "meta-llama/Llama-3.1-8B-Instruct"});
  base.settings.engine = engines::Engine::sglang;
  EXPECT_FALSE(VllmSweep::create(base, gpus({"H100"}), k_splits).has_value());
  base.settings.engine = engines::Engine::vllm;
  base.settings.quantization = "mxfp4";  // a dense model has no experts to quantize
  EXPECT_FALSE(VllmSweep::create(base, gpus({"H100"}), k_splits).has_value());
  base.settings.quantization = "nope";
  EXPECT_FALSE(VllmSweep::create(base, gpus({"H100"}), k_splits).has_value());
}

}  // namespace
}  // namespace kvprof::engines
