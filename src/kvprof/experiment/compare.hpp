// `kvprof compare`: two or more runs side by side against the first — the settings that differ,
// each memory figure per component and per GPU with the difference and the % change, latency and
// throughput per condition, and the CUDA graph question (extra graphs from the engines' logs, the
// memory they cost, per graph), with the estimate's prediction of the same difference beside the
// measured one. Also `estimate --compare`: two plans and their difference.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/estimate/result.hpp"
#include "kvprof/results/run_summary.hpp"

namespace kvprof::experiment {

// The figures of one estimate that a comparison uses.
struct PlanFigures {
  std::string flags;  // how it was asked for
  // weights (with a draft model), kv_cache, activations, overhead (CUDA graphs, non-torch, CUDA
  // context), total, cuda_graph: bytes per GPU.
  std::map<std::string, double> components;
  std::optional<uint64_t> cuda_graphs;                            // captured per GPU (0 when eager)
  std::vector<std::pair<std::string, uint32_t>> cuda_graph_sets;  // "draft_len_4" -> graphs
};

// The figures of `est`; cuda_graphs only where the engine's plan models graphs (vLLM,
// TensorRT-LLM).
PlanFigures plan_figures(const estimate::Estimate& est, std::string flags);

// One compared figure: its value in each run, and against the first run in each other run.
struct DiffRow {
  std::string section;  // "memory", "GPU 0", "measured breakdown", "reported by engine", ...
  std::string name;
  std::string unit;                           // "bytes", "graphs", "blocks", "tokens", "ms", ...
  std::vector<std::optional<double>> values;  // one per run
  std::vector<std::optional<double>> diff;    // run i - run 0, for i >= 1
  std::vector<std::optional<double>> pct;     // diff / run 0 x 100
};

// The CUDA graph question for run i against run 0.
struct GraphDelta {
  std::string run_id;
  std::optional<uint64_t> graphs_base, graphs_other;  // from the engines' logs
  std::optional<int64_t> extra_graphs;
  std::string memory_figure;                    // which figure the overhead is the difference of
  std::optional<int64_t> overhead_bytes;        // that figure, run i - run 0
  std::optional<double> increase_pct;           // of run 0's figure
  std::optional<double> bytes_per_graph;        // overhead / extra graphs
  std::optional<int64_t> reported_graph_bytes;  // the engines' own "CUDA graphs took", i - 0
  // The estimate's prediction of the same difference.
  std::optional<int64_t> estimated_extra_graphs;
  std::optional<int64_t> estimated_overhead_bytes;  // total per GPU, i - 0
  std::optional<double> estimated_bytes_per_graph;
};

struct SettingDiff {
  std::string name;
  std::vector<std::string> values;  // one per run; "-" when the run did not set it
};

struct Comparison {
  std::vector<results::RunSummary> runs;
  std::vector<SettingDiff> settings;  // only those that differ
  std::vector<DiffRow> memory;
  std::vector<DiffRow> latency;
  std::vector<GraphDelta> graphs;  // one per run after the first, when any graph count is known
  std::vector<std::string> notes;
};

// Compares `runs` (at least two) against the first. `plans` is empty (each run's recorded
// estimate is used where it has one) or one plan per run.
Comparison compare_runs(std::vector<results::RunSummary> runs,
                        const std::vector<PlanFigures>& plans);

nlohmann::json comparison_json(const Comparison& comparison);
std::string comparison_text(const Comparison& comparison);

// `estimate --compare`: plan B against plan A, per component, with the CUDA graph difference.
nlohmann::json plan_comparison_json(const PlanFigures& a, const PlanFigures& b);
std::string plan_comparison_text(const PlanFigures& a, const PlanFigures& b);

}  // namespace kvprof::experiment
