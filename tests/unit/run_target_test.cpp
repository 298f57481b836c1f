// run::open_target, the one place a run's server and its memory come from: the simulator answers
// with its own memory; a launch is filled (placeholders as shell words, a port picked) for each
// profile run to start, or started now and stopped with its whole group; a server that dies
// before it answers is a network error with nothing left running; a remote endpoint gets no
// local GPU memory, with a warning.
#include "kvprof/run/target.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "support/serve_process.hpp"
#include "support/temp_dir.hpp"

namespace kvprof::run {
namespace {

using namespace std::chrono_literals;

class RunTarget : public test::TempDirTest {
 protected:
  RunTarget() : TempDirTest("kvprof_run_target") {}
};

uint16_t port_of(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  return static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1)));
}

TEST_F(RunTarget, TheSimulatorAnswersWithItsOwnMemory) {
  TargetSpec spec;
  spec.kind = TargetKind::simulator;
  spec.sim.model = "meta-llama/Llama-3.1-8B-Instruct";
  spec.sim.gpu = "H100";
  spec.sim.port = 0;
  auto t = open_target(spec);
  ASSERT_TRUE(t.has_value()) << t.error().message;
  EXPECT_EQ((*t)->memory_name, "simulated");
  ASSERT_NE((*t)->memory, nullptr);
  EXPECT_EQ((*t)->memory->device_count().value_or(0), 1U);
  EXPECT_FALSE((*t)->simulation.empty());
  EXPECT_EQ((*t)->simulation_details.at("gpu"), "H100");
  const uint16_t port = port_of((*t)->endpoint);
  const auto models = test::http_request(port, "GET", "/v1/models");
  EXPECT_EQ(models.status, 200);
  EXPECT_NE(models.body.find("Llama-3.1-8B-Instruct"), std::string::npos) << models.body;
  (*t)->stop();
  (*t)->stop();  // twice is fine
  EXPECT_EQ(test::http_request(port, "GET", "/v1/models").status, 0);
}

TEST_F(RunTarget, ALaunchIsFilledForEachRunToStart) {
  TargetSpec spec;
  spec.kind = TargetKind::launch;
  spec.launch.command_template =
      "serve --model {model} --port {port} --host {host} -np "
      "{max_concurrency}";
  spec.launch.model = "a model;touch x";
  spec.launch.max_concurrency = 8;
  auto t = open_target(spec);
  ASSERT_TRUE(t.has_value()) << t.error().message;
  ASSERT_TRUE((*t)->launch.has_value());
  const auto& ls = *(*t)->launch;
  EXPECT_EQ(ls.host, "127.0.0.1");
  EXPECT_GT(ls.port, 0);
  EXPECT_EQ((*t)->endpoint, "http://127.0.0.1:" + std::to_string(ls.port) + "/v1");
  EXPECT_EQ(ls.command, "serve --model 'a model;touch x' --port " + std::to_string(ls.port) +
                            " --host 127.0.0.1 -np 8");
  EXPECT_EQ((*t)->memory, nullptr);  // no source asked for
  EXPECT_EQ((*t)->memory_name, "none");
  EXPECT_EQ((*t)->started_pid, -1);

  spec.launch.command_template = "serve {nonsense}";
  const auto bad = open_target(spec);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().kind, ErrorKind::usage);
  EXPECT_NE(bad.error().message.find("nonsense"), std::string::npos) << bad.error().message;
}

TEST_F(RunTarget, AServerStartedNowAnswersThenGoesWithItsGroup) {
  TargetSpec spec;
  spec.kind = TargetKind::launch;
  spec.launch.command_template = std::string(KVPROF_BIN) +
                                 " serve-sim --model {model} --gpu H100 --host {host} "
                                 "--port {port}";
  spec.launch.model = "meta-llama/Llama-3.1-8B-Instruct";
  spec.launch.start_now = true;
  spec.launch.ready_timeout_s = 30;
  spec.launch.grace_s = 2;
  spec.launch.log_path = m_dir / "server.log";
  auto t = open_target(spec);
  ASSERT_TRUE(t.has_value()) << t.error().message;
  EXPECT_FALSE((*t)->launch.has_value());  // started now: no run starts it again
  const pid_t pid = (*t)->started_pid;
  ASSERT_GT(pid, 0);
  EXPECT_EQ(test::http_request(port_of((*t)->endpoint), "GET", "/v1/models").status, 200);
  (*t)->stop();
  EXPECT_NE(::kill(-pid, 0), 0) << "a process of the server's group is still there";
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(RunTarget, AServerThatDiesBeforeItAnswersIsANetworkErrorWithItsLog) {
  TargetSpec spec;
  spec.kind = TargetKind::launch;
  spec.launch.command_template = "echo 'no model here' >&2; exit 3 # {port}";
  spec.launch.start_now = true;
  spec.launch.ready_timeout_s = 10;
  spec.launch.log_path = m_dir / "server.log";
  const auto t = open_target(spec);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().kind, ErrorKind::network);
  EXPECT_NE(t.error().message.find("no model here"), std::string::npos) << t.error().message;
}

TEST_F(RunTarget, ARemoteEndpointGetsNoLocalGpuMemory) {
  TargetSpec spec;
  spec.kind = TargetKind::endpoint;
  spec.endpoint = "http://10.1.2.3:8000/v1";
  spec.gpu_source = gpu::GpuSourceSpec{};  // auto
  const auto t = open_target(spec);
  ASSERT_TRUE(t.has_value()) << t.error().message;
  EXPECT_EQ((*t)->endpoint, spec.endpoint);
  EXPECT_EQ((*t)->memory, nullptr);
  EXPECT_TRUE((*t)->memory_warn);
  EXPECT_NE((*t)->memory_note.find("not on this machine"), std::string::npos) << (*t)->memory_note;
}

// bench's engine runs in-process: this machine's GPUs (NVML, here the fake driver) or none, never
// a node's monitoring; there is no URL.
TEST_F(RunTarget, TheInProcessEngineGetsThisMachinesGpus) {
  TargetSpec spec;
  spec.kind = TargetKind::in_process;
  spec.gpu_source = gpu::parse_gpu_source("dcgm=http://node1:9400/metrics").value();
  const auto remote = open_target(spec);
  ASSERT_FALSE(remote.has_value());
  EXPECT_EQ(remote.error().kind, ErrorKind::usage);

  spec.gpu_source = gpu::parse_gpu_source("none").value();
  const auto none = open_target(spec);
  ASSERT_TRUE(none.has_value()) << none.error().message;
  EXPECT_EQ((*none)->memory, nullptr);
  EXPECT_TRUE((*none)->endpoint.empty());

  ::setenv("KVPROF_NVML_LIBRARY", KVPROF_FAKE_NVML_PATH, 1);
  ::setenv("KVPROF_FAKE_NVML_GPUS", "1", 1);
  spec.gpu_source = gpu::parse_gpu_source("auto").value();
  const auto local = open_target(spec);
  ::unsetenv("KVPROF_NVML_LIBRARY");
  ::unsetenv("KVPROF_FAKE_NVML_GPUS");
  ASSERT_TRUE(local.has_value()) << local.error().message;
  EXPECT_NE((*local)->memory, nullptr);
  EXPECT_EQ((*local)->memory_name, "nvml");
}

}  // namespace
}  // namespace kvprof::run
