// bench_estimate: planner throughput on one core.
//  - BM_FullEstimate: one complete vLLM estimate (tensor inventory, per-rank budget, KV groups,
//    log lines) per iteration.
//  - BM_WorkloadSweep: (context, concurrency) configurations checked against a planned
//    deployment, the inner loop of a sweep; items/s = configurations per second.
//  - BM_Recommend: the whole --recommend search (20 GPUs x 4 counts).
//  - BM_SweepGrid: VllmSweep::for_each over 20 GPUs x TP {1,2,4,8} x utilization x
//    max_model_len x context x concurrency (69,120 configurations, each with the figures
//    engines::plan() gives); items/s = configurations per second.
//  - BM_SweepPoint: VllmSweep::evaluate on each of those configurations independently (the
//    budget recomputed for every one); BM_SweepCreate: building the sweep's plans.
#include <benchmark/benchmark.h>

#include <vector>

#include "kvprof/engines/registry.hpp"
#include "kvprof/engines/vllm/sweep.hpp"
#include "kvprof/estimate/estimate.hpp"
#include "kvprof/estimate/inverse.hpp"
#include "kvprof/model/catalog.hpp"

namespace {

using namespace kvprof;

estimate::EstimateInput make_input(const char* model_id) {
  estimate::EstimateInput in;
  in.model = model::catalog_model(model_id).value();
  in.gpu = gpu::find_gpu("H100").value();
  in.settings.max_model_len = 32768;
  return in;
}

void BM_FullEstimate(benchmark::State& state) {
  const auto in = make_input("meta-llama/Llama-3.1-8B-Instruct");
  for (auto _ : state) {
    auto est = engines::plan(in);
    benchmark::DoNotOptimize(est);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FullEstimate);

void BM_FullEstimateHybrid(benchmark::State& state) {
  const auto in = make_input("google/gemma-2-27b-it");
  for (auto _ : state) {
    auto est = engines::plan(in);
    benchmark::DoNotOptimize(est);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FullEstimateHybrid);

void BM_WorkloadSweep(benchmark::State& state) {
  const auto est = engines::plan(make_input("google/gemma-2-27b-it")).value();
  uint64_t fits = 0;
  uint64_t ctx = 128;
  uint32_t conc = 1;
  for (auto _ : state) {
    const uint64_t need = est.request_kv_bytes(ctx) * conc;
    fits += need <= est.kv_capacity_bytes ? 1 : 0;
    ctx = ctx >= 32768 ? 128 : ctx + 97;
    conc = conc >= 256 ? 1 : conc + 1;
  }
  benchmark::DoNotOptimize(fits);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WorkloadSweep);

void BM_Recommend(benchmark::State& state) {
  const auto in = make_input("meta-llama/Llama-3.1-70B-Instruct");
  for (auto _ : state) {
    auto recs = estimate::recommend(in, &engines::plan);
    benchmark::DoNotOptimize(recs);
  }
}
BENCHMARK(BM_Recommend)->Unit(benchmark::kMillisecond);

const char* const k_sweep_models[] = {"meta-llama/Llama-3.1-8B-Instruct", "google/gemma-2-27b-it",
                                      "ai21labs/AI21-Jamba-1.5-Mini"};

engines::VllmSweep make_sweep(const char* model_id) {
  const auto gpus = gpu::gpu_catalog();  // 20 GPUs
  return engines::VllmSweep::create(make_input(model_id), gpus, {{1, 1}, {2, 1}, {4, 1}, {8, 1}})
      .value();
}

engines::SweepGrid sweep_grid() {
  engines::SweepGrid grid;
  grid.gpu_memory_utilizations = {0.8, 0.85, 0.9, 0.95};
  grid.max_model_lens = {4096, 8192, 16384, 32768, 65536, 131072};
  grid.context_tokens = {1024, 4096, 16384, 65536};
  grid.concurrency = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  return grid;
}

void BM_SweepGrid(benchmark::State& state) {
  const auto sweep = make_sweep(k_sweep_models[state.range(0)]);
  const auto grid = sweep_grid();
  uint64_t fits = 0;
  uint64_t n = 0;
  for (auto _ : state) {
    n += sweep.for_each(grid, [&fits](const engines::SweepPoint&, const engines::SweepResult& r) {
      fits += r.verdict == estimate::Verdict::fits ? 1 : 0;
    });
  }
  benchmark::DoNotOptimize(fits);
  state.SetItemsProcessed(static_cast<int64_t>(n));
  state.SetLabel(k_sweep_models[state.range(0)]);
  state.counters["grid"] = static_cast<double>(sweep.grid_size(grid));
}
BENCHMARK(BM_SweepGrid)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

void BM_SweepPoint(benchmark::State& state) {
  const auto sweep = make_sweep(k_sweep_models[state.range(0)]);
  std::vector<engines::SweepPoint> points;
  sweep.for_each(sweep_grid(), [&points](const engines::SweepPoint& p,
                                         const engines::SweepResult&) { points.push_back(p); });
  uint64_t fits = 0;
  for (auto _ : state) {
    for (const auto& p : points)
      fits += sweep.evaluate(p).verdict == estimate::Verdict::fits ? 1 : 0;
  }
  benchmark::DoNotOptimize(fits);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * points.size()));
  state.SetLabel(k_sweep_models[state.range(0)]);
}
BENCHMARK(BM_SweepPoint)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

void BM_SweepCreate(benchmark::State& state) {
  for (auto _ : state) {
    auto sweep = make_sweep(k_sweep_models[state.range(0)]);
    benchmark::DoNotOptimize(sweep);
  }
  state.SetLabel(k_sweep_models[state.range(0)]);
}
BENCHMARK(BM_SweepCreate)->DenseRange(0, 2)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
