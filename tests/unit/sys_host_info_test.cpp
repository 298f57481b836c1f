// Host facts for `kvprof env`: os-release/cpuinfo/meminfo parsers, version-line picking, engine
// discovery with fake engine scripts on a temporary PATH, and the `env` command as a program
// with the fake NVML.
#include "kvprof/sys/host_info.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "kvprof/sys/subprocess.hpp"
#include "support/fake_nvml_fixture.hpp"

namespace kvprof::sys {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(HostInfoParse, OsRelease) {
  EXPECT_EQ(
      parse_os_release("NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\nID=ubuntu\n").value(),
      "Ubuntu 22.04.4 LTS");
  EXPECT_EQ(parse_os_release("PRETTY_NAME=Alpine\n").value(), "Alpine");
  EXPECT_FALSE(parse_os_release("NAME=x\n").has_value());
  EXPECT_FALSE(parse_os_release("PRETTY_NAME=\"\"\n").has_value());
}

TEST(HostInfoParse, CpuinfoCountsLogicalAndPhysicalCores) {
  std::string text;
  for (int p = 0; p < 4; ++p) {  // 2 sockets x 1 core x 2 threads
    text += fmt::format(
        "processor\t: {}\nmodel name\t: AMD EPYC 7763 64-Core Processor\nphysical id\t: {}\n"
        "core id\t\t: 0\n\n",
        p, p / 2);
  }
  const CpuInfo cpu = parse_cpuinfo(text);
  EXPECT_EQ(cpu.model.value(), "AMD EPYC 7763 64-Core Processor");
  EXPECT_EQ(cpu.logical_cores, 4U);
  EXPECT_EQ(cpu.physical_cores.value(), 2U);
  // ARM-style cpuinfo: no model name, no core ids.
  const CpuInfo arm = parse_cpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\n");
  EXPECT_EQ(arm.logical_cores, 2U);
  EXPECT_FALSE(arm.model.has_value());
  EXPECT_FALSE(arm.physical_cores.has_value());
}

TEST(HostInfoParse, Meminfo) {
  const MemInfo m =
      parse_meminfo("MemTotal:       131072000 kB\nMemFree:  1 kB\nMemAvailable:   65536000 kB\n");
  EXPECT_EQ(m.total_bytes.value(), 131072000ULL * 1024);
  EXPECT_EQ(m.available_bytes.value(), 65536000ULL * 1024);
  EXPECT_FALSE(parse_meminfo("MemTotal: x kB\n").total_bytes.has_value());
}

TEST(HostInfoParse, PickVersionLine) {
  EXPECT_EQ(pick_version_line("0.6.3.post1\n", "INFO 10-10 12:00:00 importing torch\n").value(),
            "0.6.3.post1");
  EXPECT_EQ(pick_version_line("", "version: 3906 (7eee341b)\nbuilt with cc 12\n").value(),
            "version: 3906 (7eee341b)");
  EXPECT_EQ(
      pick_version_line("ollama version is 0.3.12\n", "Warning: client version 0.3.12\n").value(),
      "ollama version is 0.3.12");
  EXPECT_FALSE(pick_version_line("usage: tool [options]\n", "").has_value());
  EXPECT_EQ(pick_version_line(std::string(500, '7'), "").value().size(), 200U);
}

TEST(HostInfo, ReadsThisMachine) {
  const OsInfo os = read_os_info();
  EXPECT_EQ(os.kernel_name, "Linux");
  EXPECT_FALSE(os.kernel_release.empty());
  EXPECT_GE(read_cpu_info().logical_cores, 1U);
  const MemInfo mem = read_mem_info();
  ASSERT_TRUE(mem.total_bytes.has_value());
  EXPECT_GT(*mem.total_bytes, 64ULL << 20);
  EXPECT_LE(mem.available_bytes.value(), *mem.total_bytes);
}

class FakeEngines : public test::FakeNvmlTest {
 protected:
  FakeEngines() : FakeNvmlTest("kvprof_engines") {}
  void SetUp() override {
    FakeNvmlTest::SetUp();
    fs::create_directories(m_dir / "bin");
    script("vllm", "echo 'INFO importing' >&2; echo 0.9.1");
    script("llama-server", "echo 'version: 4589 (abcdef)' >&2; echo 'built with cc' >&2");
    script("ollama", "exec sleep 30");  // hangs: must be cut by the timeout
    script("sglang", "exit 1");         // prints nothing
    std::ofstream(m_dir / "bin" / "trtllm-serve") << "not executable\n";
  }
  void script(const std::string& name, const std::string& body) {
    const fs::path p = m_dir / "bin" / name;
    std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(p, fs::perms::owner_all);
  }
  [[nodiscard]] std::string path_list() const {
    return (m_dir / "bin").string() + ":/usr/bin:/bin";
  }
};

TEST_F(FakeEngines, FindsEnginesAndTheirVersionsWithATimeout) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto engines = find_engines(path_list(), 700ms);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);  // the hanging one was killed
  ASSERT_EQ(engines.size(), known_engines().size());
  auto get = [&](const std::string& name) {
    for (const auto& e : engines) {
      if (e.name == name) return e;
    }
    ADD_FAILURE() << name;
    return EngineInfo{};
  };
  EXPECT_EQ(get("vllm").version.value(), "0.9.1");
  EXPECT_EQ(get("vllm").path.value(), (m_dir / "bin" / "vllm").string());
  EXPECT_EQ(get("llama-server").version.value(), "version: 4589 (abcdef)");
  EXPECT_FALSE(get("ollama").version.has_value());
  EXPECT_TRUE(get("ollama").path.has_value());
  EXPECT_NE(get("ollama").note.find("timed out"), std::string::npos) << get("ollama").note;
  EXPECT_FALSE(get("sglang").version.has_value());
  EXPECT_NE(get("sglang").note.find("exit 1"), std::string::npos);
  EXPECT_FALSE(get("trtllm-serve").path.has_value());  // not executable
  EXPECT_FALSE(get("text-generation-launcher").path.has_value());
}

TEST_F(FakeEngines, EnvCommandReportsFakeGpusAndEngines) {
  fs::remove(m_dir / "bin" / "ollama");  // keep the run under the 5 s limit
  CommandOptions o;
  o.timeout = 30s;
  o.env = {{"PATH", path_list()},
           {"KVPROF_NVML_LIBRARY", KVPROF_FAKE_NVML_PATH},
           {"KVPROF_FAKE_NVML_GPUS", "2"}};
  auto r = run_command({KVPROF_BIN, "env", "--json"}, o);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->exit_code, 0) << r->stderr_text;
  const auto j = nlohmann::json::parse(r->stdout_text);
  EXPECT_EQ(j["os"]["kernel_name"], "Linux");
  EXPECT_GE(j["cpu"]["logical_cores"].get<int>(), 1);
  EXPECT_GT(j["memory"]["total_bytes"].get<uint64_t>(), 0U);
  ASSERT_TRUE(j["gpu"]["available"].get<bool>());
  EXPECT_EQ(j["gpu"]["driver_version"], "550.54.15");
  EXPECT_EQ(j["gpu"]["cuda_driver_version"], "12.4");
  ASSERT_EQ(j["gpu"]["devices"].size(), 2U);
  const auto& d1 = j["gpu"]["devices"][1];
  EXPECT_EQ(d1["name"], "NVIDIA H100 80GB HBM3 (fake)");
  EXPECT_EQ(d1["total_bytes"], 85520809984ULL);
  EXPECT_EQ(d1["reserved_bytes"], 553648128ULL);
  EXPECT_EQ(d1["used_includes_reserved"], false);
  bool saw_vllm = false;
  for (const auto& e : j["engines"]) {
    if (e["name"] == "vllm") {
      saw_vllm = true;
      EXPECT_EQ(e["version"], "0.9.1");
    }
    if (e["name"] == "text-generation-launcher") {
      EXPECT_EQ(e["found"], false);
    }
  }
  EXPECT_TRUE(saw_vllm);

  // Text form, and the clear line without a driver.
  o.env[1].second = (m_dir / "no-such-libnvidia-ml.so.1").string();
  r = run_command({KVPROF_BIN, "env"}, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  EXPECT_NE(r->stdout_text.find("GPU:     no NVIDIA driver"), std::string::npos) << r->stdout_text;
  EXPECT_NE(r->stdout_text.find("vllm"), std::string::npos);
  EXPECT_NE(r->stdout_text.find("not found"), std::string::npos);
}

}  // namespace
}  // namespace kvprof::sys
