// Every node of a multi-node job sampled: while a sweep's configuration runs inside a job that
// holds several nodes (pipeline stages across nodes), `kvprof sample --node-dir` runs on each of
// them as one step of the scheduler's, beside the run. What they recorded joins the run folder:
// nodes/<node>/gpu_mem_trace.csv, and in summary.json `nodes`, each node's GPUs with their first
// and highest readings. The run's own breakdown stays that of the node it ran on.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "kvprof/results/run_summary.hpp"
#include "kvprof/scheduler/job_environment.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::profile {
class LaunchedServer;
}

namespace kvprof::experiment {

class NodeSamplers {
 public:
  // Starts `kvprof sample --node-dir <dir>` (the kvprof at `kvprof`) on every node of `job`, its
  // output in <dir>/samplers.log; nullptr for a job of one node. An io error when the step
  // cannot be started.
  static Expected<std::unique_ptr<NodeSamplers>> start(const scheduler::JobEnvironment& job,
                                                       const std::filesystem::path& kvprof,
                                                       const std::filesystem::path& dir,
                                                       uint32_t interval_ms);
  ~NodeSamplers();
  NodeSamplers(const NodeSamplers&) = delete;
  NodeSamplers& operator=(const NodeSamplers&) = delete;

  // Ends the samplers (the scheduler ends the step); each trace keeps every row written.
  void stop();

 private:
  NodeSamplers() = default;
  std::unique_ptr<profile::LaunchedServer> m_step;
};

// Each node's GPU trace under `dir` (<dir>/<node>/gpu_mem_trace.csv): per GPU its first and
// highest used bytes, nodes in name order; an input error for a trace that is not one.
Expected<std::vector<results::NodeMemory>> read_node_traces(const std::filesystem::path& dir);

// Moves the node folders of `dir` into <run_dir>/nodes/ and writes `nodes` (each node's GPUs)
// into the run's summary.json.
Expected<void> attach_node_memory(const std::filesystem::path& run_dir,
                                  const std::filesystem::path& dir,
                                  const std::vector<results::NodeMemory>& nodes);

}  // namespace kvprof::experiment
