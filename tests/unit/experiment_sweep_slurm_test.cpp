// `kvprof sweep --executor slurm` on a real single-node Slurm cluster (Debian's slurmctld, slurmd
// and munge, started for each test by scripts/slurm-cluster.sh with four GPUs in gres.conf): the
// dry run's batch scripts, every configuration a job that samples the GPUs Slurm gave it, the
// runs in the history, a job Slurm cancels recorded with Slurm's word for it, and Ctrl-C leaving
// or cancelling the jobs with the sweep resumable either way.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kvprof/sys/subprocess.hpp"
#include "support/serve_process.hpp"
#include "support/slurm_sweep_test.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

using SweepSlurm = test::SlurmSweepTest;

TEST_F(SweepSlurm, DryRunPrintsEachJobsBatchScriptAndSubmitsNothing) {
  const auto config = sweep_file("dry");
  const auto r = sweep(config, {"--dry-run", "--partition", "gpu", "--time-limit", "0:30:00",
                                "--sbatch-arg=--qos=normal"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  // One script per configuration, asking for its tensor-parallel GPUs.
  EXPECT_NE(r.stdout_text.find("#SBATCH --gres=gpu:1\n"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("#SBATCH --gres=gpu:2\n"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("#SBATCH --partition=gpu\n"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("#SBATCH --time=0:30:00\n"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("#SBATCH --qos=normal\n"), std::string::npos);
  // The results folder's blank is quoted for the shell, the job runs this kvprof.
  EXPECT_NE(r.stdout_text.find("--output-dir '" + results().string() + "'"), std::string::npos);
  EXPECT_NE(r.stdout_text.find(std::string("exec ") + KVPROF_BIN + " sweep"), std::string::npos);
  EXPECT_NE(r.stdout_text.find("dry run: 2 slurm jobs would be submitted"), std::string::npos);
  EXPECT_EQ(slurm({"squeue", "-h", "--me"}).stdout_text, "");

  // The same jobs as Kubernetes Indexed Jobs: each configuration's command is the one its Slurm
  // script runs.
  const auto commands = [](const std::string& text) {
    std::set<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      line.erase(0, line.find_first_not_of(' '));
      if (line.starts_with(std::string("exec ") + KVPROF_BIN)) out.insert(line);
    }
    return out;
  };
  const auto k8s =
      sweep(config, {"--dry-run", "--executor", "kubernetes", "--k8s-image", "kvprof:test",
                     "--k8s-pvc", "results", "--k8s-mount-path", m_dir.string()});
  ASSERT_EQ(k8s.exit_code, 0) << k8s.stderr_text;
  std::ifstream manifests(results() / "sweeps" / "dry" / "kubernetes.yaml");
  const std::string manifest_text(std::istreambuf_iterator<char>(manifests), {});
  EXPECT_EQ(commands(manifest_text), commands(r.stdout_text));
  EXPECT_EQ(commands(manifest_text).size(), 2U) << manifest_text;

  // Tensor x pipeline parallel GPUs beyond a node: several nodes, the same GPUs on each.
  const fs::path pp = m_dir / "pp.yaml";
  std::ofstream(pp) << "name: pp\ngpu: H100\ninput_lengths: [64]\noutput_lengths: [4]\n"
                       "models:\n  - model_id: meta-llama/Llama-3.1-70B-Instruct\n"
                       "    batch_sizes: [1]\n    max_model_len: 4096\n"
                       "    tensor_parallel_size: 2\n    pipeline_parallel_size: 3\n";
  const auto multi = sweep(pp, {"--dry-run", "--gpus-per-node", "4"});
  ASSERT_EQ(multi.exit_code, 0) << multi.stderr_text;
  EXPECT_NE(multi.stdout_text.find("tp2 pp3"), std::string::npos) << multi.stdout_text;
  EXPECT_NE(multi.stdout_text.find("#SBATCH --nodes=2\n"), std::string::npos) << multi.stdout_text;
  EXPECT_NE(multi.stdout_text.find("#SBATCH --gres=gpu:3\n"), std::string::npos);

  // A partition name Slurm could misread is refused before anything is submitted.
  const auto bad = sweep(config, {"--partition", "gpu --account=x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.stderr_text.find("--partition"), std::string::npos) << bad.stderr_text;
}

TEST_F(SweepSlurm, EachConfigurationIsAJobOnItsGpusAndItsRunReachesTheHistory) {
  const auto r = sweep(sweep_file("grid"), {});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("submitted as slurm job"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("running on "), std::string::npos) << r.stderr_text;
  const auto cs = configurations("grid");
  ASSERT_EQ(cs.size(), 2U);
  for (const auto& [id, c] : cs) {
    ASSERT_EQ(c.at("status"), "done") << c.dump();
    EXPECT_FALSE(c.at("run").at("job").at("id").get<std::string>().empty());
    EXPECT_FALSE(c.at("run").at("job").at("node").get<std::string>().empty());
    // The run sampled the GPUs Slurm gave its job (one for tp1, two for tp2), as the job's log
    // says it was given them.
    const json summary = read_json(c.at("run").at("run_dir").get<std::string>() + "/summary.json");
    const size_t tp = c.at("settings").at("tensor_parallel_size").get<size_t>();
    ASSERT_EQ(summary.at("gpus").size(), tp) << id;
    std::string sampled;
    for (const auto& g : summary.at("gpus"))
      sampled += (sampled.empty() ? "" : ",") + std::to_string(g.at("index").get<unsigned>());
    std::ifstream log(results() / "sweeps" / "grid" / "jobs" /
                      (c.at("fingerprint").get<std::string>() + ".log"));
    const std::string log_text(std::istreambuf_iterator<char>(log), {});
    EXPECT_NE(log_text.find(", GPUs: " + sampled + "\n"), std::string::npos)
        << id << " sampled " << sampled << "; its log: " << log_text;
    EXPECT_TRUE(c.at("run").at("measured").at("peak_used_bytes").is_number()) << id;
  }
  // Both runs and the sweep are in the history, once.
  sys::CommandOptions o;
  o.env = env();
  auto runs = sys::run_command(
      {KVPROF_BIN, "runs", "--results-dir", results().string(), "--json", "--sweep", "grid"}, o);
  ASSERT_TRUE(runs && runs->exit_code == 0);
  const json h = json::parse(runs->stdout_text);
  EXPECT_EQ(h.at("n_entries"), 3) << runs->stdout_text;

  // Run again: everything is finished, nothing is submitted.
  const auto again = sweep(sweep_file("grid"), {});
  ASSERT_EQ(again.exit_code, 0) << again.stderr_text;
  EXPECT_EQ(again.stderr_text.find("submitted"), std::string::npos) << again.stderr_text;
  EXPECT_NE(again.stdout_text.find("2 finished before"), std::string::npos) << again.stdout_text;
}

// Four configurations — three serve-sim servers (tensor-parallel 1, 2 and 1) and a real
// llama.cpp server (`kvprof serve`, the real libllama) on a dummy GGUF — run as four jobs, two at
// once where the cluster's GPUs and cores allow, each listed once in the history.
TEST_F(SweepSlurm, FourConfigurationsWithARealLlamaCppServerRunTwoAtOnce) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(test::write_dummy_llama(m_dir / "tiny.gguf", 32000));
  const std::string sim = std::string(KVPROF_BIN) +
                          " serve-sim --model {model} --gpu {gpu} --host {host} --port {port} "
                          "--max-num-seqs {max_concurrency} --max-model-len {max_model_len} "
                          "--live-state " +
                          (m_dir / "live.txt").string();
  const fs::path config = m_dir / "four.yaml";
  std::ofstream(config) << "name: four\nbaseline_s: 0.3\npost_warmup_s: 0.1\nwarmup_requests: 1\n"
                           "min_condition_s: 0.5\ngpu: H100\ninput_lengths: [64]\n"
                           "output_lengths: [4]\nlaunch_timeout_s: 120\nmodels:\n"
                           "  - model_id: meta-llama/Llama-3.1-8B-Instruct\n"
                           "    batch_sizes: [1]\n    max_model_len: 2048\n    launch: \""
                        << sim
                        << "\"\n  - model_id: Qwen/Qwen2.5-7B-Instruct\n    batch_sizes: [1]\n"
                           "    tensor_parallel_size: 2\n    max_model_len: 2048\n    launch: \""
                        << sim
                        << "\"\n  - model_id: meta-llama/Llama-3.1-8B-Instruct\n"
                           "    batch_sizes: [2]\n    max_model_len: 4096\n    launch: \""
                        << sim << "\"\n  - model_id: " << (m_dir / "tiny.gguf").string()
                        << "\n    batch_sizes: [1]\n    launch: \"" << KVPROF_BIN
                        << " serve -m {model} --llama-lib " << lib_dir->string()
                        << " -t 1 -q -c 1024 -np 1 --host {host} --port {port}\"\n";
  const auto r = sweep(config, {});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const auto cs = configurations("four");
  ASSERT_EQ(cs.size(), 4U);
  std::vector<std::pair<double, double>> spans;  // each job's run, start and end
  for (const auto& [id, c] : cs) {
    ASSERT_EQ(c.at("status"), "done") << c.dump();
    const json summary = read_json(c.at("run").at("run_dir").get<std::string>() + "/summary.json");
    if (c.at("gpu") == "cpu") {
      // The llama.cpp server: its host memory, the buffers it stated.
      EXPECT_GT(summary.at("host_memory").at("peak_rss_bytes").get<double>(), 0) << id;
      EXPECT_NE(c.at("settings").at("engine"), "vllm") << id;
    } else {
      EXPECT_EQ(summary.at("gpus").size(),
                c.at("settings").at("tensor_parallel_size").get<size_t>())
          << id;
    }
    const double start = c.at("run").at("started_unix_s").get<double>();
    spans.emplace_back(start, start + c.at("run").at("duration_s").get<double>());
  }
  size_t most_at_once = 0;
  for (const auto& [start, end] : spans) {
    size_t n = 0;
    for (const auto& [s2, e2] : spans)
      n += s2 <= start && start < e2 ? 1 : 0;
    most_at_once = std::max(most_at_once, n);
  }
  EXPECT_GE(most_at_once, 2U) << "the jobs ran one after another";
  sys::CommandOptions o;
  o.env = env();
  auto runs = sys::run_command(
      {KVPROF_BIN, "runs", "--results-dir", results().string(), "--json", "--sweep", "four"}, o);
  ASSERT_TRUE(runs && runs->exit_code == 0);
  std::map<std::string, int> kinds;
  const json listed = json::parse(runs->stdout_text);
  for (const auto& e : listed.at("entries"))
    ++kinds[e.at("kind").get<std::string>()];
  EXPECT_EQ(kinds, (std::map<std::string, int>{{"profile", 4}, {"sweep", 1}}));
}

// What Slurm refuses is one clear line: a partition it does not have (its own message), and no
// sbatch at all.
TEST_F(SweepSlurm, WhatSlurmRefusesIsOneLineAndNothingIsSubmitted) {
  const auto config = sweep_file("refused");
  auto r = sweep(config, {"--partition", "nosuch"});
  EXPECT_EQ(r.exit_code, 3) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("sbatch refused the job: sbatch: error: "), std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("invalid partition"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(slurm({"squeue", "-h", "--me"}).stdout_text, "");
  // No Slurm client tools in PATH.
  sys::CommandOptions o;
  o.env = env();
  o.env.emplace_back("PATH", "/nonexistent");
  auto none = sys::run_command({KVPROF_BIN, "sweep", "--config", config.string(), "--output-dir",
                                results().string(), "--executor", "slurm"},
                               o);
  ASSERT_TRUE(none.has_value());
  EXPECT_EQ(none->exit_code, 2);
  EXPECT_NE(none->stderr_text.find("sbatch was not found in PATH"), std::string::npos)
      << none->stderr_text;
}

// Jobs that end badly: one whose kvprof is killed outright (SIGKILL, as the kernel's OOM killer
// does: it writes nothing more) and one Slurm cancels (SIGTERM: kvprof inside ends its run and
// says so). Both are failed configurations with Slurm's word for how they ended; the killed one's
// unfinished run folder says what happened; a later run submits both again.
TEST_F(SweepSlurm, AJobSlurmEndsIsAFailedConfigurationWithSlurmsReasonAndRunsAgainLater) {
  // A server that never answers: the jobs wait for it until Slurm ends them.
  const auto config = sweep_file("killed", "sleep 300");
  std::thread killer;
  std::atomic<bool> done{false};
  const auto r = sweep(config, {}, [&](pid_t) {
    killer = std::thread([&] {
      for (int i = 0; i < 1500 && !done; ++i) {
        const auto q = slurm({"squeue", "-h", "--me", "-t", "RUNNING", "-o", "%i"});
        // Both running, and their run folders made.
        if (std::count(q.stdout_text.begin(), q.stdout_text.end(), '\n') == 2) {
          std::this_thread::sleep_for(1s);
          const auto oldest = slurm({"pgrep", "-o", "-f", "--", "--name killed --job "});
          ASSERT_FALSE(oldest.stdout_text.empty());
          ::kill(std::stoi(oldest.stdout_text), SIGKILL);
          std::this_thread::sleep_for(500ms);
          (void)slurm({"scancel", "--me"});
          done = true;
          return;
        }
        std::this_thread::sleep_for(50ms);
      }
    });
  });
  if (killer.joinable()) killer.join();
  ASSERT_TRUE(done);
  EXPECT_EQ(r.exit_code, 3) << r.stderr_text;
  size_t n_without_result = 0;
  for (const auto& [id, c] : configurations("killed")) {
    EXPECT_EQ(c.at("status"), "failed") << id;
    const std::string reason = c.at("run").at("reason").get<std::string>();
    if (reason.find("before kvprof wrote its result") == std::string::npos) {
      EXPECT_NE(reason.find("ended CANCELLED"), std::string::npos) << c.dump();
      continue;
    }
    ++n_without_result;
    EXPECT_NE(reason.find("ended FAILED"), std::string::npos) << reason;
    const std::string marker = "its unfinished run folder: ";
    const size_t at = reason.find(marker);
    ASSERT_NE(at, std::string::npos) << reason;
    const json note = read_json(fs::path(reason.substr(at + marker.size())) / "job_ended.json");
    EXPECT_EQ(note.at("state"), "FAILED");
    EXPECT_EQ(note.at("job_id"), c.at("run").at("job").at("id"));
  }
  EXPECT_EQ(n_without_result, 1U) << r.stderr_text;
  // A failed configuration is submitted again by the next run.
  const auto again = sweep(sweep_file("killed"), {});
  EXPECT_EQ(again.exit_code, 0) << again.stderr_text;
  for (const auto& [id, c] : configurations("killed"))
    EXPECT_EQ(c.at("status"), "done") << id;
}

TEST_F(SweepSlurm, CtrlCLeavesTheJobsRunningOrCancelsThemAndTheSweepResumes) {
  // A server that starts slowly: the jobs are running when Ctrl-C comes.
  const std::string slow = "sh -c 'sleep 3; exec " + std::string(KVPROF_BIN) +
                           " serve-sim --model {model} --gpu {gpu} --host {host} --port {port} "
                           "--max-num-seqs {max_concurrency} --max-model-len {max_model_len} "
                           "--live-state " +
                           (m_dir / "live.txt").string() + "'";
  const auto config = sweep_file("stopped", slow);
  const auto running = [&] {
    return !slurm({"squeue", "-h", "--me", "-t", "RUNNING", "-o", "%i"}).stdout_text.empty();
  };
  std::thread t;
  std::atomic<bool> sent{false};
  auto r = sweep(config, {"--on-interrupt", "leave"}, [&](pid_t pid) {
    t = std::thread([&, pid] { interrupt_when(pid, running, sent); });
  });
  if (t.joinable()) t.join();
  ASSERT_TRUE(sent);
  EXPECT_EQ(r.exit_code, 130) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("run the same command again to collect them"), std::string::npos)
      << r.stderr_text;
  // Left running: the same jobs are followed again, not submitted twice.
  const std::string queued = slurm({"squeue", "-h", "--me", "-o", "%i"}).stdout_text;
  ASSERT_FALSE(queued.empty());
  // --status says where each stands without starting anything: its job, queued or running.
  const auto status = sweep(config, {"--status", "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.stderr_text;
  const json statuses = json::parse(status.stdout_text);
  ASSERT_EQ(statuses.size(), 2U) << statuses.dump();
  for (const auto& c : statuses) {
    ASSERT_TRUE(c.at("job").is_object()) << c.dump();
    EXPECT_NE(queued.find(c.at("job").at("id").get<std::string>()), std::string::npos) << c.dump();
    EXPECT_TRUE(c.at("job").at("state") == "RUNNING" || c.at("job").at("state") == "PENDING")
        << c.dump();
  }
  const auto text = sweep(config, {"--status"});
  EXPECT_NE(text.stdout_text.find("(job "), std::string::npos) << text.stdout_text;
  r = sweep(config, {});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("from before is"), std::string::npos) << r.stderr_text;
  for (const auto& [id, c] : configurations("stopped")) {
    EXPECT_EQ(c.at("status"), "done") << id;
    EXPECT_NE(queued.find(c.at("run").at("job").at("id").get<std::string>()), std::string::npos)
        << "job " << c.at("run").at("job").dump() << " was submitted again; first: " << queued;
  }

  // Cancelled at Ctrl-C: nothing of the sweep stays queued, and it runs again from the start.
  const auto config2 = sweep_file("cancelled", slow);
  sent = false;
  r = sweep(config2, {"--on-interrupt", "cancel"},
            [&](pid_t pid) { t = std::thread([&, pid] { interrupt_when(pid, running, sent); }); });
  if (t.joinable()) t.join();
  ASSERT_TRUE(sent);
  EXPECT_EQ(r.exit_code, 130) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("cancelled 2 jobs"), std::string::npos) << r.stderr_text;
  for (int i = 0; i < 100 && !slurm({"squeue", "-h", "--me"}).stdout_text.empty(); ++i)
    std::this_thread::sleep_for(100ms);
  EXPECT_EQ(slurm({"squeue", "-h", "--me"}).stdout_text, "");
  for (const auto& [id, c] : configurations("cancelled"))
    EXPECT_EQ(c.at("status"), "interrupted") << id;
  r = sweep(config2, {});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  for (const auto& [id, c] : configurations("cancelled"))
    EXPECT_EQ(c.at("status"), "done") << id;
  // Once every job ended, --status reads the state file: each configuration done, with its run.
  const auto done = sweep(config2, {"--status", "--json"});
  ASSERT_EQ(done.exit_code, 0) << done.stderr_text;
  for (const auto& c : json::parse(done.stdout_text)) {
    EXPECT_EQ(c.at("status"), "done") << c.dump();
    EXPECT_FALSE(c.at("run_id").get<std::string>().empty()) << c.dump();
    EXPECT_TRUE(c.at("job").is_null()) << c.dump();
  }
}

}  // namespace
}  // namespace kvprof
