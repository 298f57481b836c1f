// `kvprof sweep --executor kubernetes` submitting through kubectl: what kubectl's JSON says of a
// Job and its pod, the Job names, and a sweep end to end. No Kubernetes API server can run on the
// test machine, so the end-to-end tests put tests/support/fake_kubectl.cjs first in PATH: it
// answers kvprof's five kubectl commands as kubectl does and runs each pod as a local process.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <functional>
#include <thread>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kvprof/scheduler/kubectl_json.hpp"
#include "kvprof/scheduler/kubernetes.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "support/temp_dir.hpp"

namespace kvprof::scheduler {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

// A Job as `kubectl get job NAME -o json` prints it (the fields kvprof reads, as the API has them).
std::string job_json(const std::string& status) {
  return R"({"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"kvprof-sweep-ab12",
    "annotations":{"kvprof/name":"kvprof.sweep.ab12cd34"}},"status":)" +
         status + "}";
}

std::string pods_json(const std::string& pod_status, const std::string& node = "gpu-node-3") {
  return R"({"apiVersion":"v1","kind":"List","items":[{"metadata":{"name":"kvprof-sweep-ab12-x"},
    "spec":{"nodeName":")" +
         node + R"("},"status":)" + pod_status + "}]}";
}

TEST(KubectlJson, AJobAndItsPodSayWhereItStandsAndHowItEnded) {
  // Waiting for a node with the GPUs.
  auto s = parse_kubectl_job(
      job_json(R"({"active":1})"),
      pods_json(R"({"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False",
        "reason":"Unschedulable","message":"0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]})",
                ""));
  ASSERT_TRUE(s.has_value()) << s.error().message;
  EXPECT_EQ(s->id, "kvprof-sweep-ab12");
  EXPECT_EQ(s->name, "kvprof.sweep.ab12cd34");
  EXPECT_EQ(s->phase, JobPhase::pending);
  EXPECT_EQ(s->state, "PENDING");
  EXPECT_EQ(s->reason, "Unschedulable");
  // Running on its node.
  s = parse_kubectl_job(job_json(R"({"active":1})"),
                        pods_json(R"({"phase":"Running","containerStatuses":[{"name":"kvprof",
                          "state":{"running":{"startedAt":"2026-11-30T10:00:00Z"}}}]})"));
  EXPECT_EQ(s->phase, JobPhase::running);
  EXPECT_EQ(s->node, "gpu-node-3");
  // Its script's own exit.
  s = parse_kubectl_job(job_json(R"({"failed":1,"conditions":[{"type":"Failed","status":"True",
        "reason":"BackoffLimitExceeded"}]})"),
                        pods_json(R"({"phase":"Failed","containerStatuses":[{"name":"kvprof",
        "state":{"terminated":{"exitCode":3,"reason":"Error"}}}]})"));
  EXPECT_EQ(s->phase, JobPhase::ended);
  EXPECT_EQ(s->state, "FAILED");
  EXPECT_EQ(s->exit_code, 3);
  EXPECT_TRUE(s->ended_by_itself());
  // Killed for memory: the scheduler's doing, not the script's.
  s = parse_kubectl_job(job_json(R"({"failed":1,"conditions":[{"type":"Failed","status":"True",
        "reason":"BackoffLimitExceeded"}]})"),
                        pods_json(R"({"phase":"Failed","containerStatuses":[{"name":"kvprof",
        "state":{"terminated":{"exitCode":137,"reason":"OOMKilled"}}}]})"));
  EXPECT_EQ(s->state, "OUT_OF_MEMORY");
  EXPECT_EQ(s->reason, "OOMKilled");
  EXPECT_FALSE(s->ended_by_itself());
  // Out of time (activeDeadlineSeconds).
  s = parse_kubectl_job(job_json(R"({"failed":1,"conditions":[{"type":"Failed","status":"True",
        "reason":"DeadlineExceeded"}]})"),
                        R"({"items":[]})");
  EXPECT_EQ(s->state, "TIMEOUT");
  EXPECT_FALSE(s->ended_by_itself());
  s = parse_kubectl_job(job_json(R"({"succeeded":1,"conditions":[{"type":"Complete",
        "status":"True"}]})"),
                        pods_json(R"({"phase":"Succeeded"})"));
  EXPECT_EQ(s->state, "COMPLETED");
  EXPECT_TRUE(s->ended_by_itself());
}

TEST(KubectlJson, TheListKeepsEveryJobByItsKvprofNameAndRefusesWhatIsNotAList) {
  const auto jobs = parse_kubectl_jobs(R"({"apiVersion":"v1","kind":"List","items":[
    {"metadata":{"name":"a","annotations":{"kvprof/name":"kvprof.s.1"}},"status":{"active":1}},
    {"metadata":{"name":"b"},"status":{}},
    {"metadata":{"name":"c"},"status":{"conditions":[{"type":"Complete","status":"True"}]}},
    {"metadata":{"name":7}}, 12]})");
  ASSERT_TRUE(jobs.has_value());
  ASSERT_EQ(jobs->size(), 3U);
  EXPECT_EQ((*jobs)[0].name, "kvprof.s.1");
  EXPECT_EQ((*jobs)[0].phase, JobPhase::running);
  EXPECT_EQ((*jobs)[1].name, "b");
  EXPECT_EQ((*jobs)[1].phase, JobPhase::pending);
  EXPECT_EQ((*jobs)[2].phase, JobPhase::ended);
  for (const char* bad : {"", "[]", "{\"items\":3}", "No resources found", "{\"items\":[}"}) {
    const auto r = parse_kubectl_jobs(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_EQ(r.error().kind, ErrorKind::input);
  }
  EXPECT_FALSE(parse_kubectl_job("{}", R"({"items":[]})").has_value());  // no name
}

TEST(KubernetesJobName, ADnsLabelTheSameEachTimeAndDistinctForLongNames) {
  EXPECT_EQ(kubernetes_job_name("kvprof-grid-0123abcd"), "kvprof-grid-0123abcd");
  const std::string named = kubernetes_job_name("kvprof.my_sweep.0123abcd");
  EXPECT_TRUE(named.starts_with("kvprof-my-sweep-0123abcd-")) << named;
  // Names a DNS label would merge stay apart.
  EXPECT_NE(kubernetes_job_name("kvprof.a_b.0123abcd"), kubernetes_job_name("kvprof.a.b.0123abcd"));
  EXPECT_NE(kubernetes_job_name("kvprof.Grid.0123abcd"),
            kubernetes_job_name("kvprof.grid.0123abcd"));
  const std::string a = "kvprof." + std::string(80, 's') + ".0123456789abcdef";
  const std::string b = "kvprof." + std::string(80, 's') + ".0123456789abcdee";
  EXPECT_LE(kubernetes_job_name(a).size(), 63U);
  EXPECT_EQ(kubernetes_job_name(a), kubernetes_job_name(a));
  EXPECT_NE(kubernetes_job_name(a), kubernetes_job_name(b));
  EXPECT_EQ(dns_label(kubernetes_job_name(a)), kubernetes_job_name(a));
}

class SweepKubernetes : public test::TempDirTest {
 protected:
  SweepKubernetes() : TempDirTest("kvprof_k8s") {}

  void SetUp() override {
    TempDirTest::SetUp();
    if (!sys::find_executable("node", "/usr/local/bin:/usr/bin:/bin"))
      FAIL() << "Node.js is not installed (scripts/setup.sh installs it)";
    fs::create_directories(m_dir / "bin");
    fs::create_directories(m_dir / "volume");
    fs::create_symlink(std::string(KVPROF_SOURCE_DIR) + "/tests/support/fake_kubectl.cjs",
                       m_dir / "bin" / "kubectl");
  }

  // A sweep file in `where`: two serve-sim configurations of one and two GPUs, each server
  // started `delay_s` late.
  fs::path sweep_file(const std::string& name, const fs::path& where, int delay_s = 0) const {
    const fs::path p = where / (name + ".yaml");
    std::ofstream(p) << "name: " << name
                     << "\nbaseline_s: 0.05\npost_warmup_s: 0.05\nwarmup_requests: 1\n"
                        "min_condition_s: 0.05\ngpu: H100\ninput_lengths: [64]\n"
                        "output_lengths: [4]\nlaunch_timeout_s: 120\nlaunch: \"sh -c 'sleep "
                     << delay_s << "; exec " << KVPROF_BIN
                     << " serve-sim --model {model} --gpu {gpu} --host {host} --port {port} "
                        "--max-num-seqs {max_concurrency} --max-model-len {max_model_len}'"
                     << R"("
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

  sys::CommandResult sweep(const fs::path& config, std::vector<std::string> args,
                           std::vector<std::pair<std::string, std::string>> extra_env = {},
                           std::function<void(pid_t)> on_spawn = {}) const {
    std::vector<std::string> argv = {KVPROF_BIN,
                                     "sweep",
                                     "--config",
                                     config.string(),
                                     "--output-dir",
                                     (m_dir / "volume" / "results").string(),
                                     "--poll-s",
                                     "0.2",
                                     "--no-report",
                                     "--executor",
                                     "kubernetes",
                                     "--k8s-image",
                                     "registry.example/kvprof:1",
                                     "--k8s-pvc",
                                     "kvprof-results",
                                     "--k8s-mount-path",
                                     (m_dir / "volume").string(),
                                     "--kvprof-path",
                                     KVPROF_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    sys::CommandOptions o;
    o.timeout = 120s;
    const char* path = std::getenv("PATH");
    o.env = {{"PATH", (m_dir / "bin").string() + ":" + (path != nullptr ? path : "/usr/bin:/bin")},
             {"FAKE_KUBE_DIR", (m_dir / "kube").string()},
             {"KVPROF_OUTPUT_DIR", ""}};
    o.env.insert(o.env.end(), extra_env.begin(), extra_env.end());
    o.on_spawn = std::move(on_spawn);
    auto r = sys::run_command(argv, o);
    EXPECT_TRUE(r.has_value());
    return r ? *r : sys::CommandResult{};
  }

  // Interrupts the sweep `pid` (SIGINT) once kubectl has created `n` Jobs.
  void interrupt_after_creates(pid_t pid, size_t n, std::atomic<bool>& sent) const {
    for (int i = 0; i < 1500 && !sent; ++i) {
      const std::string log = calls();
      size_t creates = 0;
      for (size_t at = log.find("create -f"); at != std::string::npos;
           at = log.find("create -f", at + 1))
        ++creates;
      if (creates >= n) {
        ::kill(pid, SIGINT);
        sent = true;
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
  }

  std::string calls() const {
    std::ifstream in(m_dir / "kube" / "calls.log");
    return {std::istreambuf_iterator<char>(in), {}};
  }
};

TEST_F(SweepKubernetes, EachConfigurationIsAJobOfOnePodAndARerunSubmitsNothing) {
  const auto config = sweep_file("kube", m_dir / "volume");
  auto r = sweep(config, {"--k8s-namespace", "Team-A"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text << r.stdout_text;
  // Two Jobs created from their JSON manifests, in the namespace as a DNS label.
  const std::string log = calls();
  size_t creates = 0;
  for (size_t at = log.find("create -f"); at != std::string::npos;
       at = log.find("create -f", at + 1))
    ++creates;
  EXPECT_EQ(creates, 2U) << log;
  std::ifstream ns(m_dir / "kube" / "namespace");
  std::string name_space;
  ns >> name_space;
  EXPECT_EQ(name_space, "team-a");
  // Each manifest asks for its configuration's GPUs and mounts the claim.
  const fs::path jobs = m_dir / "volume" / "results" / "sweeps" / "kube" / "jobs";
  std::vector<json> manifests;
  for (const auto& e : fs::directory_iterator(jobs)) {
    if (e.path().extension() == ".json" && !e.path().string().ends_with(".result.json")) {
      std::ifstream in(e.path());
      manifests.push_back(json::parse(in));
    }
  }
  ASSERT_EQ(manifests.size(), 2U);
  std::set<int> gpus;
  for (const auto& m : manifests) {
    const auto& c = m.at("spec").at("template").at("spec").at("containers").at(0);
    gpus.insert(c.at("resources").at("limits").at("nvidia.com/gpu").get<int>());
    EXPECT_EQ(c.at("image"), "registry.example/kvprof:1");
    EXPECT_EQ(m.at("spec").at("backoffLimit"), 0);
    EXPECT_EQ(m.at("metadata").at("annotations").at("kvprof/name").get<std::string>().substr(0, 12),
              "kvprof.kube.");
  }
  EXPECT_EQ(gpus, (std::set<int>{1, 2}));
  // Both done, with the node the pod ran on; their runs are in the history.
  std::ifstream s(m_dir / "volume" / "results" / "sweeps" / "kube" / "sweep.json");
  const json sweep_json = json::parse(s);
  ASSERT_EQ(sweep_json.at("configurations").size(), 2U);
  for (const auto& c : sweep_json.at("configurations")) {
    EXPECT_EQ(c.at("status"), "done") << c.dump();
    // The Job the run inside says it was, and the pod's node.
    const auto& job = c.at("run").at("job");
    EXPECT_TRUE(job.at("id").get<std::string>().starts_with("kvprof-kube-")) << c.dump();
    EXPECT_EQ(job.at("node"), "fake-node") << c.dump();
  }
  const auto runs =
      sys::run_command({KVPROF_BIN, "runs", "--results-dir",
                        (m_dir / "volume" / "results").string(), "--json", "--sweep", "kube"});
  ASSERT_TRUE(runs && runs->exit_code == 0);
  // Its two runs and the sweep.
  EXPECT_EQ(json::parse(runs->stdout_text).at("n_entries"), 3) << runs->stdout_text;

  // Again: everything finished, nothing submitted.
  r = sweep(config, {});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const std::string again = calls().substr(log.size());
  EXPECT_EQ(again.find("create"), std::string::npos) << again;
}

TEST_F(SweepKubernetes, CtrlCLeavesTheJobsOrDeletesThemAndTheSweepResumes) {
  const auto config = sweep_file("left", m_dir / "volume", 3);
  std::thread t;
  std::atomic<bool> sent{false};
  auto r = sweep(config, {"--on-interrupt", "leave"}, {}, [&](pid_t pid) {
    t = std::thread([&, pid] { interrupt_after_creates(pid, 2, sent); });
  });
  if (t.joinable()) t.join();
  ASSERT_TRUE(sent);
  EXPECT_EQ(r.exit_code, 130) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("run the same command again to collect them"), std::string::npos)
      << r.stderr_text;
  // Left: found again by their kvprof names and followed, not created twice.
  const size_t before = calls().size();
  r = sweep(config, {});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("from before is"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(calls().substr(before).find("create"), std::string::npos) << calls();

  // Deleted at Ctrl-C: kubectl delete job for both, their pods stopped.
  const auto config2 = sweep_file("deleted", m_dir / "volume", 3);
  sent = false;
  r = sweep(config2, {"--on-interrupt", "cancel"}, {}, [&](pid_t pid) {
    t = std::thread([&, pid] { interrupt_after_creates(pid, 4, sent); });
  });
  if (t.joinable()) t.join();
  ASSERT_TRUE(sent);
  EXPECT_EQ(r.exit_code, 130) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("cancelled 2 jobs"), std::string::npos) << r.stderr_text;
  EXPECT_NE(calls().find("delete job --ignore-not-found --wait=false kvprof-deleted-"),
            std::string::npos)
      << calls();
  size_t left = 0;
  for (const auto& e : fs::directory_iterator(m_dir / "kube" / "jobs"))
    left += e.path().string().find("kvprof-deleted-") != std::string::npos ? 1 : 0;
  EXPECT_EQ(left, 0U);
}

TEST_F(SweepKubernetes, FilesOffTheVolumeARefusalAndNoKubectlAreOneLineEach) {
  // The sweep file outside the claim: the pods would not see it; nothing is submitted.
  const auto outside = sweep_file("off", m_dir);
  auto r = sweep(outside, {});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("is not under --k8s-mount-path"), std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(calls().find("create"), std::string::npos);
  // The cluster refuses (a quota, a webhook): its message, each configuration failed, exit 3.
  const auto config = sweep_file("refused", m_dir / "volume");
  r = sweep(config, {},
            {{"FAKE_KUBE_REFUSE", "Error from server (Forbidden): exceeded quota: gpu-quota"}});
  EXPECT_EQ(r.exit_code, 3) << r.stderr_text;
  EXPECT_NE((r.stdout_text + r.stderr_text).find("exceeded quota: gpu-quota"), std::string::npos)
      << r.stdout_text << r.stderr_text;
  // No kubectl at all.
  fs::remove(m_dir / "bin" / "kubectl");
  std::vector<std::string> argv = {
      KVPROF_BIN,   "sweep",      "--config",         config.string(),
      "--executor", "kubernetes", "--k8s-image",      "i",
      "--k8s-pvc",  "p",          "--k8s-mount-path", (m_dir / "volume").string()};
  sys::CommandOptions o;
  o.env = {{"PATH", (m_dir / "bin").string()}};
  const auto none = sys::run_command(argv, o);
  ASSERT_TRUE(none.has_value());
  EXPECT_NE(none->exit_code, 0);
  EXPECT_NE(none->stderr_text.find("kubectl was not found in PATH"), std::string::npos)
      << none->stderr_text;
}

}  // namespace
}  // namespace kvprof::scheduler
