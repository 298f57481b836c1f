// Test-only: a real Slurm cluster of this test's own (Debian's slurmctld, slurmd and munge,
// started by scripts/slurm-cluster.sh in SetUp, stopped in TearDown) and `kvprof sweep` run
// against it. One node with four GPUs, or several nodes of four GPUs each on this machine.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kvprof/sys/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace kvprof::test {

using namespace std::chrono_literals;

class SlurmSweepTest : public TempDirTest {
 protected:
  // A cluster of `nodes` nodes (scripts/slurm-cluster.sh's KVPROF_SLURM_NODES), four GPUs each.
  explicit SlurmSweepTest(unsigned nodes = 1) : TempDirTest("kvprof_slurm"), m_nodes(nodes) {}

  void SetUp() override {
    TempDirTest::SetUp();
    if (!sys::find_executable("slurmctld", "/usr/sbin:/usr/bin:/sbin:/bin")) {
      if (std::getenv("KVPROF_REQUIRE_SLURM") != nullptr)
        FAIL() << "Slurm is not installed (scripts/setup.sh installs it)";
      GTEST_SKIP() << "Slurm is not installed (scripts/setup.sh installs it)";
    }
    // A cluster of this test's own: its folder (a short path: slurmd's sockets live there), its
    // ports.
    static int n_started = 0;
    const int n = n_started++;
    m_cluster = std::filesystem::temp_directory_path() /
                ("kvprof-slurm-" + std::to_string(::getpid()) + "-" + std::to_string(n));
    std::filesystem::remove_all(m_cluster);
    // Below Linux's ephemeral ports (32768 on), which a connection elsewhere may hold: a
    // one-node cluster takes two ports from 20000 on, one of several nodes 2 + its nodes from
    // 12000 to 19999.
    const int port = m_nodes == 1 ? 20000 + static_cast<int>((::getpid() * 8 + n) % 6000) * 2
                                  : 12000 + static_cast<int>((::getpid() * 8 + n) % 800) * 10;
    sys::CommandOptions o;
    o.timeout = 60s;
    o.env = {{"KVPROF_SLURM_PORT", std::to_string(port)},
             {"KVPROF_SLURM_NODES", std::to_string(m_nodes)}};
    auto r = sys::run_command({"bash", std::string(KVPROF_SOURCE_DIR) + "/scripts/slurm-cluster.sh",
                               "start", m_cluster.string()},
                              o);
    ASSERT_TRUE(r && r->exit_code == 0) << (r ? r->stderr_text + r->stdout_text : "");
    m_started = true;
  }

  void TearDown() override {
    if (m_started) {
      (void)slurm({"scancel", "--me"});
      sys::CommandOptions o;
      o.timeout = 30s;
      (void)sys::run_command({"bash", std::string(KVPROF_SOURCE_DIR) + "/scripts/slurm-cluster.sh",
                              "stop", m_cluster.string()},
                             o);
      std::error_code ec;
      std::filesystem::remove_all(m_cluster, ec);
    }
    TempDirTest::TearDown();
  }

  std::vector<std::pair<std::string, std::string>> env() const {
    std::vector<std::pair<std::string, std::string>> out = {
        {"SLURM_CONF", (m_cluster / "slurm.conf").string()},
        {"KVPROF_NVML_LIBRARY", KVPROF_FAKE_NVML_PATH},
        {"KVPROF_FAKE_NVML_GPUS", "4"},
        {"KVPROF_FAKE_NVML_LIVE", (m_dir / "live.txt").string()},
        {"KVPROF_OUTPUT_DIR", ""}};
    out.insert(out.end(), m_extra_env.begin(), m_extra_env.end());
    return out;
  }

  sys::CommandResult slurm(std::vector<std::string> argv) const {
    sys::CommandOptions o;
    o.timeout = 30s;
    o.env = env();
    auto r = sys::run_command(argv, o);
    return r ? *r : sys::CommandResult{};
  }

  // A sweep file of two configurations (tensor-parallel 1 and 2) whose servers are serve-sim
  // launched by the job; `launch` replaces the server when given.
  std::filesystem::path sweep_file(const std::string& name, const std::string& launch = "") const {
    const std::string server =
        launch.empty() ? std::string(KVPROF_BIN) +
                             " serve-sim --model {model} --gpu {gpu} --host {host} --port {port} "
                             "--max-num-seqs {max_concurrency} --max-model-len {max_model_len} "
                             "--live-state " +
                             (m_dir / "live.txt").string()
                       : launch;
    const std::filesystem::path p = m_dir / (name + ".yaml");
    std::ofstream(p) << "name: " << name
                     << "\nbaseline_s: 0.05\npost_warmup_s: 0.05\nwarmup_requests: 1\n"
                        "min_condition_s: 0.05\ngpu: H100\ninput_lengths: [64]\n"
                        "output_lengths: [4]\nlaunch_timeout_s: 120\nlaunch: \""
                     << server << R"("
models:
  - model_id: meta-llama/Llama-3.1-8B-Instruct
    batch_sizes: [1]
    max_model_len: 2048
  - model_id: Qwen/Qwen2.5-7B-Instruct
    batch_sizes: [1]
    tensor_parallel_size: 2
    max_model_len: 2048
)";
    return p;
  }

  // `kvprof sweep --executor slurm` (or the --executor in `args`) with `args`; `on_spawn` gets its
  // pid.
  sys::CommandResult sweep(const std::filesystem::path& config, std::vector<std::string> args,
                           std::function<void(pid_t)> on_spawn = {}) const {
    std::vector<std::string> argv = {KVPROF_BIN,      "sweep",        "--config",
                                     config.string(), "--output-dir", (m_dir / "res ults").string(),
                                     "--poll-s",      "0.2",          "--no-report"};
    // Slurm unless the test names another executor.
    if (std::ranges::find(args, "--executor") == args.end())
      argv.insert(argv.end(), {"--executor", "slurm"});
    argv.insert(argv.end(), args.begin(), args.end());
    sys::CommandOptions o;
    o.timeout = 120s;
    o.env = env();
    o.on_spawn = std::move(on_spawn);
    auto r = sys::run_command(argv, o);
    EXPECT_TRUE(r.has_value());
    return r ? *r : sys::CommandResult{};
  }

  nlohmann::json read_json(const std::filesystem::path& p) const {
    std::ifstream in(p);
    return nlohmann::json::parse(in);
  }

  std::filesystem::path results() const { return m_dir / "res ults"; }

  // The configurations of sweep `name`'s sweep.json: id -> its entry.
  std::map<std::string, nlohmann::json> configurations(const std::string& name) const {
    std::map<std::string, nlohmann::json> out;
    const nlohmann::json s = read_json(results() / "sweeps" / name / "sweep.json");
    for (const auto& c : s.at("configurations"))
      out[c.at("id").get<std::string>()] = c;
    return out;
  }

  // Sends SIGINT to the sweep once its stderr file... (polled): when `ready()` is true.
  static void interrupt_when(pid_t pid, const std::function<bool()>& ready,
                             std::atomic<bool>& sent) {
    for (int i = 0; i < 1500 && !sent; ++i) {
      if (ready()) {
        ::kill(pid, SIGINT);
        sent = true;
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
  }

  unsigned m_nodes = 1;
  // More variables for the sweeps (and through them the jobs), e.g. a PATH.
  std::vector<std::pair<std::string, std::string>> m_extra_env;
  std::filesystem::path m_cluster;
  bool m_started = false;
};

}  // namespace kvprof::test
