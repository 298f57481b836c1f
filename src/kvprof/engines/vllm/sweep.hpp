// Sweeping vLLM deployments of one model: the tensor inventory, per-rank weights, KV grouping and
// activation coefficients are built once per (TP, PP) split, then every configuration of GPU x
// split x utilization x max_model_len x batch limits x (context, concurrency) is evaluated with
// no allocation and no formatting, by the same arithmetic as the plan (budget.hpp), so
// each figure equals engines::plan()'s for that configuration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvprof/engines/vllm/budget.hpp"
#include "kvprof/estimate/estimate.hpp"

namespace kvprof::engines {

using estimate::ActivationModel;
using estimate::EngineSettings;
using estimate::Estimate;
using estimate::EstimateInput;
using estimate::Verdict;

struct SweepSplit {
  uint32_t tp = 1;
  uint32_t pp = 1;
};

// One configuration. A zero setting takes the base settings' value, else vLLM's default (for
// the GPU, in the batch limits' case).
struct SweepPoint {
  uint32_t gpu_index = 0;    // into the sweep's GPUs
  uint32_t split_index = 0;  // into the sweep's splits
  double gpu_memory_utilization = 0;
  uint64_t max_model_len = 0;
  uint32_t max_num_seqs = 0;
  uint32_t max_num_batched_tokens = 0;
  uint64_t context_tokens = 0;  // tokens per request; 0 = max_model_len
  uint32_t concurrency = 1;     // requests in flight
};

// What engines::plan() answers for the point's input with the workload {context} x {concurrency}.
struct SweepResult {
  bool valid = false;  // false where engines::plan() returns an error instead (a split that does
                       // not divide the model, a utilization outside (0, 1])
  uint64_t weights_bytes = 0;   // per_gpu.weights_bytes
  uint64_t kv_cache_bytes = 0;  // per_gpu.kv_cache_bytes
  uint64_t num_gpu_blocks = 0;
  uint64_t kv_cache_tokens = 0;
  double max_concurrency = 0;
  uint64_t total_bytes = 0;      // per_gpu.total_bytes
  int64_t headroom_bytes = 0;    // GPU memory - total
  uint64_t kv_needed_bytes = 0;  // the workload row's cache
  Verdict row_verdict = Verdict::fits;
  Verdict verdict = Verdict::fits;
};

// The grid: every GPU x split x every combination of these lists (values as in SweepPoint).
struct SweepGrid {
  std::vector<double> gpu_memory_utilizations{0.0};
  std::vector<uint64_t> max_model_lens{0};
  std::vector<uint32_t> max_num_batched_tokens{0};
  std::vector<uint32_t> max_num_seqs{0};
  std::vector<uint64_t> context_tokens{0};
  std::vector<uint32_t> concurrency{1};
};

class VllmSweep {
 public:
  // Plans base.model (and base.draft) under base.settings for each split on `gpus`; returns a
  // usage error when the engine is not vLLM, --quantization contradicts the checkpoint or a GPU
  // has no memory, and an input error when the model has no layers.
  static Expected<VllmSweep> create(const EstimateInput& base, std::vector<gpu::GpuSpec> gpus,
                                    std::vector<SweepSplit> splits);

  // The figures of one configuration; allocates nothing. Indices must be in range.
  [[nodiscard]] SweepResult evaluate(const SweepPoint& p) const;

  // Calls visit(point, result) for every configuration of `grid`, context and concurrency
  // innermost (the budget is computed once per outer configuration); returns how many.
  template <class Visit>
  uint64_t for_each(const SweepGrid& grid, Visit&& visit) const;

  // Configurations for_each(grid) visits.
  [[nodiscard]] uint64_t grid_size(const SweepGrid& grid) const;

  [[nodiscard]] const std::vector<gpu::GpuSpec>& gpus() const { return m_gpus; }
  [[nodiscard]] const std::vector<SweepSplit>& splits() const { return m_splits; }

 private:
  // A configuration's budget before the workload row.
  struct Budget {
    bool valid = false;
    uint64_t gpu_memory_bytes = 0;
    uint64_t max_model_len = 0;
    uint32_t max_num_batched_tokens = 0;
    const VllmSplitPlan* plan = nullptr;
    VllmBudget budget;
  };

  VllmSweep() = default;
  [[nodiscard]] Budget budget(const SweepPoint& p) const;
  [[nodiscard]] static SweepResult finish(const Budget& b, uint64_t context_tokens,
                                          uint32_t concurrency);

  std::vector<gpu::GpuSpec> m_gpus;
  std::vector<bool> m_gpu_large;
  std::vector<bool> m_gpu_pcie;  // per GPU: PCIe, so no large TP communication buffers
  std::vector<SweepSplit> m_splits;
  std::vector<size_t> m_gpu_padding;  // per GPU: its MXFP4 padding's index
  size_t m_paddings = 1;              // distinct paddings; plans are [split * m_paddings + padding]
  std::vector<VllmSplitPlan> m_plans;
  std::vector<bool> m_split_valid;
  ActivationModel m_activation;
  EngineSettings m_base;  // the base settings, vLLM's non-batch defaults not filled in
  uint64_t m_default_max_model_len = 0;
  const VllmVersionRules* m_rules = &vllm_default_version();
};

template <class Visit>
uint64_t VllmSweep::for_each(const SweepGrid& grid, Visit&& visit) const {
  uint64_t n = 0;
  SweepPoint p;
  for (p.gpu_index = 0; p.gpu_index < m_gpus.size(); ++p.gpu_index) {
    for (p.split_index = 0; p.split_index < m_splits.size(); ++p.split_index) {
      for (const double util : grid.gpu_memory_utilizations) {
        p.gpu_memory_utilization = util;
        for (const uint64_t max_model_len : grid.max_model_lens) {
          p.max_model_len = max_model_len;
          for (const uint32_t mnbt : grid.max_num_batched_tokens) {
            p.max_num_batched_tokens = mnbt;
            for (const uint32_t mns : grid.max_num_seqs) {
              p.max_num_seqs = mns;
              const Budget b = budget(p);
              for (const uint64_t ctx : grid.context_tokens) {
                p.context_tokens = ctx;
                for (const uint32_t conc : grid.concurrency) {
                  p.concurrency = conc;
                  visit(static_cast<const SweepPoint&>(p), finish(b, ctx, conc));
                  ++n;
                }
              }
            }
          }
        }
      }
    }
  }
  return n;
}

}  // namespace kvprof::engines
