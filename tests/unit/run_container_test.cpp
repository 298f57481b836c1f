// A server in a container (`--container`, a sweep's `container_name`): the runtime's
// `container inspect` answer read into the URL kvprof measures, and the whole path — the runtime
// asked, the published port found, the server profiled — with a stand-in runtime on PATH that
// answers as docker does, around a real server (serve-sim) on this machine.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "kvprof/engines/engine.hpp"
#include "kvprof/run/container.hpp"
#include "support/run_folders.hpp"
#include "support/run_kvprof.hpp"
#include "support/sim_server_test.hpp"

namespace kvprof::run {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) {
  std::ifstream in(fs::path(KVPROF_FIXTURES_DIR) / "containers" / name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The docker fixture with `edit` applied to its one container object.
std::string edited_docker(const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(fixture("docker_inspect_vllm.json"));
  edit(j.at(0));
  return j.dump();
}

TEST(Container, DockerInspectOfAVllmContainerGivesItsPublishedPortEngineAndModel) {
  const auto info = parse_container_inspect(fixture("docker_inspect_vllm.json"), "vllm-inference");
  ASSERT_TRUE(info.has_value()) << info.error().message;
  EXPECT_EQ(info->name, "vllm-inference");
  EXPECT_EQ(info->image, "vllm/vllm-openai:v0.6.3");
  EXPECT_EQ(info->engine, "vllm");
  EXPECT_EQ(info->engine_version, "0.6.3");
  EXPECT_EQ(info->model, "meta-llama/Llama-2-7b-hf");
  EXPECT_EQ(info->engine_port, 8000);
  EXPECT_EQ(info->endpoint(), "http://127.0.0.1:8000/v1");  // 0.0.0.0: reached on the loopback
}

TEST(Container, PodmanInspectOfALlamaServerReadsItsPortFlagAndBuild) {
  const auto info = parse_container_inspect(fixture("podman_inspect_llamacpp.json"), "llama-qwen");
  ASSERT_TRUE(info.has_value()) << info.error().message;
  EXPECT_EQ(info->engine, "llamacpp");
  EXPECT_EQ(info->engine_version, "b4753");
  EXPECT_EQ(info->model, "/models/qwen2.5-0.5b-instruct-q8_0.gguf");
  EXPECT_EQ(info->engine_port, 8081);  // --port, not llama-server's default 8080
  EXPECT_EQ(info->endpoint(), "http://127.0.0.1:18081/v1");
}

TEST(Container, HostNetworkMeansTheEnginesOwnPortOnThisMachine) {
  const auto text = edited_docker([](nlohmann::json& c) {
    c["Config"]["Image"] = "lmsysorg/sglang:v0.4.6.post1-cu124";
    c["Path"] = "python3";
    c["Args"] = {"-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-7B-Instruct"};
    c["HostConfig"]["NetworkMode"] = "host";
    c["NetworkSettings"]["Ports"] = nlohmann::json::object();
  });
  const auto info = parse_container_inspect(text, "sgl");
  ASSERT_TRUE(info.has_value()) << info.error().message;
  EXPECT_EQ(info->engine, "sglang");
  EXPECT_EQ(info->engine_version, "0.4.6.post1-cu124");
  EXPECT_EQ(info->model, "Qwen/Qwen2.5-7B-Instruct");
  EXPECT_EQ(info->endpoint(), "http://127.0.0.1:30000/v1");  // SGLang's default port
}

TEST(Container, AnImageOfNoKnownEngineUsesTheOnePortItPublishes) {
  const auto text = edited_docker([](nlohmann::json& c) {
    c["Config"]["Image"] = "registry.example.com/team/server:latest";
    c["Path"] = "/srv/start";
    c["Args"] = nlohmann::json::array();
    c["NetworkSettings"]["Ports"] = {
        {"9000/tcp", {{{"HostIp", "127.0.0.1"}, {"HostPort", "19000"}}}}, {"9001/udp", nullptr}};
  });
  const auto info = parse_container_inspect(text, "custom");
  ASSERT_TRUE(info.has_value()) << info.error().message;
  EXPECT_TRUE(info->engine.empty());
  EXPECT_TRUE(info->engine_version.empty());
  EXPECT_EQ(info->endpoint(), "http://127.0.0.1:19000/v1");
}

TEST(Container, TheEngineIsToldFromTheImagesPeopleRun) {
  using engines::Engine;
  using engines::engine_of_image;
  EXPECT_EQ(engine_of_image("vllm/vllm-openai:v0.8.5"), Engine::vllm);
  EXPECT_EQ(engine_of_image("rocm/vllm:latest"), Engine::vllm);
  EXPECT_EQ(engine_of_image("lmsysorg/sglang:v0.4.6.post1-cu124"), Engine::sglang);
  EXPECT_EQ(engine_of_image("nvcr.io/nvidia/tritonserver:24.05-trtllm-python-py3"),
            Engine::trtllm);
  EXPECT_EQ(engine_of_image("nvcr.io/nvidia/tensorrt-llm/release:1.0.0"), Engine::trtllm);
  EXPECT_EQ(engine_of_image("ghcr.io/ggml-org/llama.cpp:server-cuda"), Engine::llamacpp);
  EXPECT_EQ(engine_of_image("ghcr.io/huggingface/text-generation-inference:3.0.1"), Engine::tgi);
  EXPECT_EQ(engine_of_image("ubuntu:22.04"), std::nullopt);
}

TEST(Container, WhatCannotBeMeasuredIsSaidInOneLine) {
  const auto stopped = parse_container_inspect(edited_docker([](nlohmann::json& c) {
                                                 c["State"]["Status"] = "exited";
                                                 c["State"]["Running"] = false;
                                               }),
                                               "vllm-inference");
  ASSERT_FALSE(stopped.has_value());
  EXPECT_NE(stopped.error().message.find("is not running (exited)"), std::string::npos)
      << stopped.error().message;
  const auto unpublished =
      parse_container_inspect(edited_docker([](nlohmann::json& c) {
                                c["NetworkSettings"]["Ports"] = {{"8000/tcp", nullptr}};
                              }),
                              "vllm-inference");
  ASSERT_FALSE(unpublished.has_value());
  EXPECT_NE(unpublished.error().message.find("publishes no port kvprof can reach for its "
                                             "engine's port 8000"),
            std::string::npos)
      << unpublished.error().message;
  for (const std::string& bad : {std::string("[]"), std::string("{\"Id\": 1}"), std::string("[1"),
                                 std::string(40, '[') + std::string(40, ']'),
                                 std::string(k_max_container_inspect_bytes + 1, ' ')}) {
    const auto r = parse_container_inspect(bad, "x");
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().kind, ErrorKind::input);
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << r.error().message;
  }
}

// `kvprof profile --container NAME` with a stand-in runtime on PATH that answers `container
// inspect` as docker does (the fixture, its published port set to the running server's) and
// "No such container" as docker does for any other name.
class ContainerProfile : public test::SimServerTest {
 protected:
  ContainerProfile() : SimServerTest("kvprof_container") {}

  std::string write_runtime() {
    const auto inspect = m_dir / "inspect.json";
    std::ofstream(inspect) << edited_docker([this](nlohmann::json& c) {
      c["NetworkSettings"]["Ports"]["8000/tcp"] = {
          {{"HostIp", "0.0.0.0"}, {"HostPort", std::to_string(m_server->port())}}};
    });
    const auto bin = m_dir / "bin";
    fs::create_directories(bin);
    const auto runtime = bin / "docker";
    std::ofstream(runtime) << "#!/bin/sh\n"
                              "if [ \"$1 $2 $3\" = \"container inspect vllm-inference\" ]; then\n"
                              "  cat '"
                           << inspect.string()
                           << "'\n"
                              "  exit 0\n"
                              "fi\n"
                              "echo \"Error response from daemon: No such container: $3\" >&2\n"
                              "echo '[]'\n"
                              "exit 1\n";
    fs::permissions(runtime, fs::perms::owner_all);
    return "PATH=" + bin.string() + ":$PATH KVPROF_CONTAINER_RUNTIME= KVPROF_URL=";
  }
};

TEST_F(ContainerProfile, ProfilesTheServerAtThePortTheContainerPublishes) {
  start_server(small_vllm(5.0));
  const std::string env = write_runtime();
  const auto r = test::run_kvprof_env(
      env, "profile --container vllm-inference --gpu-source none --output-dir " +
               (m_dir / "results").string() +
               " --input-lens 64 --output-lens 4 --concurrencies 1,2 --prefix-modes low "
               "--baseline-s 0.1 --post-warmup-s 0.1 --min-condition-s 0 -q");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("kvprof: container vllm-inference (vllm/vllm-openai:v0.6.3, vllm 0.6.3): "
                       "measuring " +
                       m_server->base_url()),
            std::string::npos)
      << r.out;
  const auto dirs = test::run_folders(m_dir / "results");
  ASSERT_EQ(dirs.size(), 1U);
  std::ifstream in(dirs.front() / "summary.json");
  const auto summary = nlohmann::json::parse(in);
  EXPECT_EQ(summary.at("metadata").at("endpoint").get<std::string>(), m_server->base_url())
      << summary.dump(1);
  EXPECT_EQ(summary.at("conditions").size(), 2U);
  std::ifstream manifest_in(dirs.front() / "manifest.json");
  const auto manifest = nlohmann::json::parse(manifest_in);
  EXPECT_EQ(manifest.at("configuration").at("user").at("container"), "vllm-inference");

  // Another name: the runtime's own reason, one line, nothing measured.
  const auto missing =
      test::run_kvprof_env(env, "profile --container vllm-other --gpu-source none -q");
  EXPECT_EQ(missing.rc, 2) << missing.out;
  EXPECT_EQ(missing.out,
            "kvprof: error: docker cannot tell where container vllm-other listens: Error response "
            "from daemon: No such container: vllm-other\n");
  // A name that is no container name never reaches the runtime (nor a shell).
  const auto hostile = test::run_kvprof_env(
      env, "profile --container 'x;touch " + (m_dir / "owned").string() + "' --gpu-source none -q");
  EXPECT_EQ(hostile.rc, 2) << hostile.out;
  EXPECT_FALSE(fs::exists(m_dir / "owned"));
  // --container names the server: with --endpoint beside it, a usage error.
  const auto both = test::run_kvprof_env(
      env, "profile --container vllm-inference --endpoint " + m_server->base_url() + " -q");
  EXPECT_EQ(both.rc, 2) << both.out;
}

TEST_F(ContainerProfile, ASweepMeasuresEachContainerItNames) {
  auto config = small_vllm(5.0);
  config.model = "meta-llama/Llama-2-7b-hf";  // the name the sweep requests, as vLLM serves it
  start_server(config);
  const std::string env = write_runtime();
  std::ofstream(m_dir / "sweep.yaml") << "name: containers\nbaseline_s: 0.05\npost_warmup_s: 0.05\n"
                                         "warmup_requests: 1\nmin_condition_s: 0.05\ngpu: H100\n"
                                         "models:\n"
                                         "  - model_id: meta-llama/Llama-2-7b-hf\n"
                                         "    container_name: vllm-inference\n"
                                         "    input_lengths: [64]\n"
                                         "    output_lengths: [4]\n"
                                         "    batch_sizes: [1, 2]\n"
                                         "  - model_id: meta-llama/Llama-2-7b-hf\n"
                                         "    container_name: vllm-gone\n"
                                         "    input_lengths: [64]\n"
                                         "    output_lengths: [4]\n"
                                         "    batch_sizes: [1]\n";
  const auto r = test::run_kvprof_env(env, "sweep --config " + (m_dir / "sweep.yaml").string() +
                                               " --output-dir " + (m_dir / "results").string());
  EXPECT_EQ(r.rc, 3) << r.out;  // one configuration failed: its container does not exist
  EXPECT_NE(
      r.out.find("container vllm-inference (vllm/vllm-openai:v0.6.3) at " + m_server->base_url()),
      std::string::npos)
      << r.out;
  std::ifstream in(m_dir / "results" / "sweeps" / "containers" / "sweep.json");
  const auto sweep = nlohmann::json::parse(in);
  const auto& configurations = sweep.at("configurations");
  ASSERT_EQ(configurations.size(), 2U) << sweep.dump(1);
  EXPECT_EQ(configurations[0].at("status"), "done") << configurations[0].dump(1);
  EXPECT_EQ(configurations[0].at("container_name"), "vllm-inference");
  EXPECT_EQ(configurations[1].at("status"), "failed");
  EXPECT_NE(configurations[1].at("run").at("reason").get<std::string>().find(
                "No such container: vllm-gone"),
            std::string::npos)
      << configurations[1].dump(1);
}

// The real docker CLI, where it is installed without a daemon to answer it.
TEST(ContainerRealDocker, WithoutADaemonTheRuntimesOwnReasonIsTheError) {
  if (test::run_shell("command -v docker").rc != 0) GTEST_SKIP() << "no docker CLI";
  if (test::run_shell("docker info").rc == 0) GTEST_SKIP() << "a docker daemon answers here";
  const auto r =
      test::run_kvprof_env("KVPROF_CONTAINER_RUNTIME=docker", "profile --container vllm -q");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("kvprof: error: docker cannot tell where container vllm listens: "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("daemon"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
}

}  // namespace
}  // namespace kvprof::run
