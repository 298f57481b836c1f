// `kvprof sweep --executor slurm` on a real Slurm cluster of two nodes (two slurmd on this
// machine, scripts/slurm-cluster.sh with KVPROF_SLURM_NODES=2): a configuration whose GPUs span
// both nodes is one job of two nodes, and a sampler on each node records that node's GPUs into
// the run folder, which `kvprof compare` reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kvprof/sys/subprocess.hpp"
#include "support/slurm_sweep_test.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class SweepSlurmTwoNodes : public test::SlurmSweepTest {
 protected:
  SweepSlurmTwoNodes() : SlurmSweepTest(2) {}

  // One configuration of tensor parallel 2 x pipeline parallel 2, a serve-sim server: with two
  // GPUs a node (--gpus-per-node 2), a job of two nodes.
  fs::path nodes_sweep_file() const {
    const fs::path config = m_dir / "nodes.yaml";
    std::ofstream(config)
        << "name: nodes\nbaseline_s: 0.3\npost_warmup_s: 0.1\nwarmup_requests: 1\n"
           "min_condition_s: 0.5\ngpu: H100\ninput_lengths: [64]\n"
           "output_lengths: [4]\nlaunch_timeout_s: 120\nlaunch: \""
        << KVPROF_BIN
        << " serve-sim --model {model} --gpu {gpu} --host {host} --port {port} "
           "--max-num-seqs {max_concurrency} --max-model-len {max_model_len} "
           "--tensor-parallel-size 2 --live-state "
        << (m_dir / "live.txt").string()
        << "\"\nmodels:\n  - model_id: meta-llama/Llama-3.1-8B-Instruct\n"
           "    batch_sizes: [1]\n    max_model_len: 2048\n"
           "    tensor_parallel_size: 2\n    pipeline_parallel_size: 2\n";
    return config;
  }
};

// The highest used bytes of GPU `gpu` in a GPU trace's device rows.
uint64_t peak_in_trace(const fs::path& trace, unsigned gpu) {
  std::ifstream in(trace);
  std::string line;
  std::getline(in, line);  // header: t_mono_ns,t_wall_ms,kind,gpu,pid,total,reserved,free,used
  uint64_t peak = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    size_t at = 0;
    for (size_t comma; (comma = line.find(',', at)) != std::string::npos; at = comma + 1)
      cells.push_back(line.substr(at, comma - at));
    cells.push_back(line.substr(at));
    if (cells.size() != 9 || cells[2] != "device" || cells[3] != std::to_string(gpu)) continue;
    if (!cells[8].empty()) peak = std::max<uint64_t>(peak, std::stoull(cells[8]));
  }
  return peak;
}

TEST_F(SweepSlurmTwoNodes, AConfigurationOverTwoNodesHasEachNodesGpusInItsRunFolder) {
  const fs::path config = nodes_sweep_file();
  const auto r = sweep(config, {"--gpus-per-node", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto cs = configurations("nodes");
  ASSERT_EQ(cs.size(), 1U);
  const json& c = cs.begin()->second;
  ASSERT_EQ(c.at("status"), "done") << c.dump();
  const std::string fingerprint = c.at("fingerprint").get<std::string>();
  std::ifstream script(results() / "sweeps" / "nodes" / "jobs" / (fingerprint + ".sbatch"));
  const std::string script_text(std::istreambuf_iterator<char>(script), {});
  EXPECT_NE(script_text.find("#SBATCH --nodes=2\n"), std::string::npos) << script_text;
  EXPECT_NE(script_text.find("#SBATCH --gres=gpu:2\n"), std::string::npos) << script_text;

  // Each node's trace is in the run folder, and summary.json names each node's GPUs with the
  // highest reading its trace holds.
  const fs::path run_dir = c.at("run").at("run_dir").get<std::string>();
  const json summary = read_json(run_dir / "summary.json");
  ASSERT_TRUE(summary.contains("nodes")) << summary.dump();
  std::set<std::string> nodes;
  for (const auto& n : summary.at("nodes")) {
    const std::string node = n.at("node").get<std::string>();
    nodes.insert(node);
    const fs::path trace = run_dir / n.at("trace").get<std::string>();
    EXPECT_EQ(trace, run_dir / "nodes" / node / "gpu_mem_trace.csv");
    ASSERT_TRUE(fs::is_regular_file(trace)) << trace;
    std::set<unsigned> gpus;
    for (const auto& g : n.at("gpus")) {
      const unsigned gpu = g.at("gpu").get<unsigned>();
      gpus.insert(gpu);
      EXPECT_EQ(g.at("peak_used_bytes").get<uint64_t>(), peak_in_trace(trace, gpu))
          << node << " GPU " << gpu;
      EXPECT_LE(g.at("first_used_bytes").get<uint64_t>(), g.at("peak_used_bytes").get<uint64_t>());
    }
    // The two GPUs Slurm gave the job on this node, not the node's four.
    EXPECT_EQ(gpus, (std::set<unsigned>{0, 1})) << node;
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"kvn1", "kvn2"})) << summary.at("nodes").dump();
  // Every field written is in docs/summary-schema.md.
  std::ifstream doc_file(fs::path(KVPROF_SOURCE_DIR) / "docs" / "summary-schema.md");
  const std::string doc(std::istreambuf_iterator<char>(doc_file), {});
  for (const auto& [key, v] : summary.at("nodes").at(0).items())
    EXPECT_NE(doc.find("| `nodes[]." + key + "` |"), std::string::npos) << key;
  for (const auto& [key, v] : summary.at("nodes").at(0).at("gpus").at(0).items())
    EXPECT_NE(doc.find("| `nodes[].gpus[]." + key + "` |"), std::string::npos) << key;
  EXPECT_EQ(c.at("run").at("job").at("node"), "kvn[1-2]");
  std::ifstream log(results() / "sweeps" / "nodes" / "jobs" / (fingerprint + ".log"));
  const std::string log_text(std::istreambuf_iterator<char>(log), {});
  EXPECT_NE(log_text.find("sampling the GPUs of all 2 nodes of job "), std::string::npos)
      << log_text;
  EXPECT_NE(log_text.find("2 nodes' GPU traces are in " + run_dir.string() + "/nodes"),
            std::string::npos)
      << log_text;
  // The GPUs of the run (on the node it ran on) as that node's sampler saw them: the peak that of
  // the run's own on the same GPU (the simulated server holds its memory on GPU 0).
  uint64_t most = 0;
  for (const auto& g : summary.at("memory_measurements").at("peak").at("per_gpu_details")) {
    const unsigned gpu = g.at("gpu").get<unsigned>();
    const uint64_t run_peak = g.at("used_bytes").get<uint64_t>();
    most = std::max(most, run_peak);
    bool seen = false;
    for (const auto& n : summary.at("nodes")) {
      // Slurm runs the batch script, and so the run, on the allocation's first node.
      if (n.at("node") != "kvn1") continue;
      for (const auto& ng : n.at("gpus")) {
        if (ng.at("gpu").get<unsigned>() != gpu) continue;
        seen = true;
        // Both read the same memory, 100 ms apart at most (the run's own sampler, every 20 ms,
        // also sees the short peaks of its requests).
        EXPECT_NEAR(static_cast<double>(ng.at("peak_used_bytes").get<uint64_t>()),
                    static_cast<double>(run_peak), static_cast<double>(run_peak) * 0.01)
            << gpu;
      }
    }
    EXPECT_TRUE(seen) << "GPU " << gpu << " of the run is not among kvn1's";
  }
  EXPECT_GT(most, 0U) << "the simulated server's memory was not sampled";

  // `kvprof compare` shows each node's GPUs.
  sys::CommandOptions o;
  o.env = env();
  o.timeout = std::chrono::seconds(30);
  auto compared = sys::run_command({KVPROF_BIN, "compare", run_dir.string(), run_dir.string()}, o);
  ASSERT_TRUE(compared && compared->exit_code == 0)
      << (compared ? compared->stderr_text + compared->stdout_text : "");
  EXPECT_NE(compared->stdout_text.find("node kvn2 GPU 1"), std::string::npos)
      << compared->stdout_text;
}

// A sampler step Slurm will not start (here an srun that refuses, first on the job's PATH) costs
// the configuration nothing: its run is done and whole, the job's log says why the other nodes
// were not sampled, and summary.json has no `nodes`.
TEST_F(SweepSlurmTwoNodes, ASamplerStepThatCannotStartLeavesTheRunWhole) {
  const fs::path bin = m_dir / "bin";
  fs::create_directories(bin);
  {
    std::ofstream srun(bin / "srun");
    srun << "#!/bin/sh\necho 'srun: error: Unable to create step for job: Job/step already "
            "completing or completed' >&2\nexit 1\n";
  }
  fs::permissions(bin / "srun", fs::perms::owner_all);
  const char* path = std::getenv("PATH");
  m_extra_env = {{"PATH", bin.string() + ":" + (path != nullptr ? path : "/usr/bin:/bin")}};
  const auto r = sweep(nodes_sweep_file(), {"--gpus-per-node", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto cs = configurations("nodes");
  ASSERT_EQ(cs.size(), 1U);
  const json& c = cs.begin()->second;
  ASSERT_EQ(c.at("status"), "done") << c.dump();
  const fs::path run_dir = c.at("run").at("run_dir").get<std::string>();
  const json summary = read_json(run_dir / "summary.json");
  EXPECT_FALSE(summary.contains("nodes")) << summary.at("nodes").dump();
  EXPECT_TRUE(summary.at("memory_measurements").at("peak").is_object());
  std::ifstream log(results() / "sweeps" / "nodes" / "jobs" /
                    (c.at("fingerprint").get<std::string>() + ".log"));
  const std::string log_text(std::istreambuf_iterator<char>(log), {});
  EXPECT_NE(log_text.find("warning: the nodes' GPU traces are not in the run folder: no node's "
                          "sampler wrote a trace"),
            std::string::npos)
      << log_text;
}

}  // namespace
}  // namespace kvprof
