// bench_estimate: planner throughput on one core.
//  - BM_FullEstimate: one complete vLLM estimate (tensor inventory, per-rank budget, KV groups,
//    log lines) per iteration.
//  - BM_WorkloadSweep: (context, concurrency) configurations checked against a planned
//    deployment, the inner loop of a sweep; items/s = configurations per second.
//  - BM_Recommend: the whole --recommend search (20 GPUs x 4 counts).
#include <benchmark/benchmark.h>

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
    auto est = estimate::estimate(in);
    benchmark::DoNotOptimize(est);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FullEstimate);

void BM_FullEstimateHybrid(benchmark::State& state) {
  const auto in = make_input("google/gemma-2-27b-it");
  for (auto _ : state) {
    auto est = estimate::estimate(in);
    benchmark::DoNotOptimize(est);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FullEstimateHybrid);

void BM_WorkloadSweep(benchmark::State& state) {
  const auto est = estimate::estimate(make_input("google/gemma-2-27b-it")).value();
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
    auto recs = estimate::recommend(in, 12);
    benchmark::DoNotOptimize(recs);
  }
}
BENCHMARK(BM_Recommend)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
