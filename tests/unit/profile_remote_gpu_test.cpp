// End-to-end: `kvprof profile` reading GPU memory from where the server runs — serve-sim's
// DCGM-exporter page directly (--gpu-source dcgm=URL), and a real Prometheus server (Debian's
// `prometheus`, started here with a config this test writes) scraping that page
// (--gpu-source prometheus=URL --gpu-selector ...). The readings must be the simulated GPU's.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kvprof/client/http_get.hpp"
#include "kvprof/profile/launcher.hpp"
#include "kvprof/sim/sim_config.hpp"
#include "kvprof/sim/sim_server.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"
#include "support/run_folders.hpp"
#include "support/run_kvprof.hpp"
#include "support/scripted_http_server.hpp"
#include "support/temp_dir.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

// Skips (or fails, where the test command requires it) without Debian's prometheus.
std::optional<std::string> find_prometheus() {
  const char* path = std::getenv("PATH");
  return sys::find_executable("prometheus", path ? path : "/usr/bin:/bin");
}

// serve-sim in this process, publishing its GPU as a DCGM exporter on node "node-a".
std::unique_ptr<sim::SimServer> start_sim() {
  sim::SimFlags flags;
  flags.model = "meta-llama/Llama-3.1-8B-Instruct";
  flags.gpu = "H100";
  flags.port = 0;
  flags.dcgm_hostname = "node-a";
  auto config = sim::sim_config_from_flags(flags);
  if (!config) return nullptr;
  config->quiet = true;
  auto server = sim::SimServer::start(*config);
  return server ? std::move(*server) : nullptr;
}

// The simulated exporter's page.
std::string dcgm_url(const sim::SimServer& server) {
  return "http://127.0.0.1:" + std::to_string(server.port()) + "/dcgm/metrics";
}

// Device rows of gpu_mem_trace.csv: their used_bytes column.
std::vector<uint64_t> device_used(const fs::path& trace) {
  std::ifstream in(trace);
  std::string line;
  std::vector<uint64_t> out;
  std::getline(in, line);
  while (std::getline(in, line)) {
    const auto f = split(line, ',');
    if (f.size() == 9 && f[2] == "device" && !f[8].empty()) out.push_back(std::stoull(f[8]));
  }
  return out;
}

fs::path only_run(const fs::path& dir) {
  return test::first_run_folder(dir);
}

std::string grid_flags() {
  return "--input-lens 64 --output-lens 8 --concurrencies 1,2 --n-per-condition 2 "
         "--baseline-s 0.6 --post-warmup-s 0.6 --warmup-requests 1 --no-host-mem -q";
}

// The simulated GPU's memory while idle, as DCGM reports it (whole MiB).
uint64_t idle_used_mib_bytes(const sim::SimServer& server) {
  const auto& c = server.config();
  return sim::sim_used_bytes(c, 0, 0) / k_mib * k_mib;
}

TEST(ProfileRemoteGpu, ReadsTheServersGpuFromItsDcgmExporter) {
  auto server = start_sim();
  ASSERT_NE(server, nullptr);
  test::ScopedTempDir out("kvprof_remote_gpu");
  const auto r = test::run_kvprof(
      "profile --endpoint " + server->base_url() + " --gpu-source dcgm=" + dcgm_url(*server) +
      " --gpu-interval-ms 100 " + grid_flags() + " --output-dir " + out.path.string());
  ASSERT_EQ(r.rc, 0) << r.out;
  const fs::path run = only_run(out.path);
  ASSERT_FALSE(run.empty()) << "no run folder in " << out.path << "; kvprof said: " << r.out;
  std::ifstream in(run / "summary.json");
  ASSERT_TRUE(in.good()) << "no summary.json in " << run << "; kvprof said: " << r.out;
  const json summary = json::parse(in);
  EXPECT_EQ(summary["memory_source"], "dcgm");
  ASSERT_EQ(summary["gpus"].size(), 1U);
  EXPECT_EQ(summary["gpus"][0]["name"], "NVIDIA H100 80GB HBM3");
  const auto used = device_used(run / "gpu_mem_trace.csv");
  ASSERT_GE(used.size(), 5U);
  const uint64_t idle = idle_used_mib_bytes(*server);
  EXPECT_EQ(*std::min_element(used.begin(), used.end()), idle);
  // A step's activations come and go; the readings never leave the simulated range.
  const auto& c = server->config();
  EXPECT_LE(*std::max_element(used.begin(), used.end()), c.total_bytes);
  const auto& baseline = summary["memory_measurements"]["baseline"]["per_gpu_details"][0];
  // The baseline is read from the exporter too: the idle GPU, plus at most the activations of
  // the probe's last step, which the simulator keeps showing until the next one.
  EXPECT_GE(baseline["min_used_bytes"].get<uint64_t>(), idle);
  EXPECT_LE(baseline["min_used_bytes"].get<uint64_t>(), idle + (256ULL << 20));
}

TEST(ProfileRemoteGpu, WrongDcgmUrlOrSelectorFailsBeforeTheRun) {
  auto server = start_sim();
  ASSERT_NE(server, nullptr);
  test::ScopedTempDir out("kvprof_remote_gpu");
  auto r = test::run_kvprof("profile --endpoint " + server->base_url() +
                            " --gpu-source dcgm=" + dcgm_url(*server) + "/nope " + grid_flags() +
                            " --output-dir " + out.path.string());
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("answered HTTP 404"), std::string::npos) << r.out;
  r = test::run_kvprof("profile --endpoint " + server->base_url() + " --gpu-source dcgm=" +
                       dcgm_url(*server) + " --gpu-selector '{Hostname=\"node-b\"}' " +
                       grid_flags() + " --output-dir " + out.path.string());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("no GPU framebuffer series"), std::string::npos) << r.out;
  r = test::run_kvprof("profile --endpoint " + server->base_url() + " --gpu-source dcgm " +
                       grid_flags() + " --output-dir " + out.path.string());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_TRUE(fs::is_empty(out.path));  // nothing was sent, no run folder
}

// A background child process, stopped with SIGTERM (then SIGKILL) when destroyed.
class Child {
 public:
  explicit Child(std::vector<std::string> argv, const fs::path& log) {
    m_pid = ::fork();
    if (m_pid == 0) {
      std::FILE* f = std::fopen(log.c_str(), "w");
      if (f != nullptr) {
        ::dup2(::fileno(f), 1);
        ::dup2(::fileno(f), 2);
      }
      std::vector<char*> args;
      for (auto& a : argv)
        args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }
  ~Child() {
    if (m_pid <= 0) return;
    ::kill(m_pid, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (::waitpid(m_pid, nullptr, WNOHANG) == m_pid) return;
      std::this_thread::sleep_for(50ms);
    }
    ::kill(m_pid, SIGKILL);
    ::waitpid(m_pid, nullptr, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

 private:
  pid_t m_pid = -1;
};

// A real Prometheus (Debian's package) scraping the simulator's exporter every 200 ms, started
// with a config written to `dir`; ready once it has scraped node-a.
class RealPrometheus {
 public:
  RealPrometheus(const std::string& binary, const fs::path& dir, uint16_t exporter_port) {
    const auto port = profile::free_port("127.0.0.1");
    if (!port) return;
    std::ofstream(dir / "prometheus.yml")
        << "global:\n  scrape_interval: 200ms\n  scrape_timeout: 150ms\n"
        << "scrape_configs:\n  - job_name: dcgm\n    metrics_path: /dcgm/metrics\n"
        << "    static_configs:\n      - targets: ['127.0.0.1:" << exporter_port << "']\n";
    url = "http://127.0.0.1:" + std::to_string(*port);
    m_child = std::make_unique<Child>(
        std::vector<std::string>{binary, "--config.file=" + (dir / "prometheus.yml").string(),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(*port),
                                 "--storage.tsdb.path=" + (dir / "data").string()},
        dir / "prometheus.log");
  }

  // Waits until Prometheus has scraped the simulated exporter at least once.
  bool wait_scraped() const {
    const std::string query =
        url + "/api/v1/query?query=" + percent_encode(R"(DCGM_FI_DEV_FB_USED{Hostname="node-a"})");
    for (int i = 0; i < 150; ++i) {
      if (auto a = client::http_get(query); a && a->status == 200) {
        if (a->body.find("node-a") != std::string::npos) return true;
      }
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }

  std::string url;

 private:
  std::unique_ptr<Child> m_child;
};

// serve-sim publishing its GPU, and a real Prometheus scraping it; skipped without Debian's
// prometheus (a failure where the test command requires it).
class ProfileThroughPrometheus : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto prometheus = find_prometheus();
    if (!prometheus) {
      if (std::getenv("KVPROF_REQUIRE_PROMETHEUS") != nullptr) {
        FAIL() << "prometheus is not installed (scripts/setup.sh installs Debian's package)";
      }
      GTEST_SKIP() << "prometheus is not installed";
    }
    server = start_sim();
    ASSERT_NE(server, nullptr);
    prom = std::make_unique<RealPrometheus>(*prometheus, dir.path, server->port());
    ASSERT_TRUE(prom->wait_scraped()) << "Prometheus never scraped serve-sim; see " << dir.path;
  }

  std::unique_ptr<sim::SimServer> server;
  test::ScopedTempDir dir{"kvprof_remote_gpu"};
  std::unique_ptr<RealPrometheus> prom;
};

TEST_F(ProfileThroughPrometheus, ReadsTheServersGpu) {
  const std::string& prom_url = prom->url;

  const fs::path out = dir.path / "results";
  const auto r = test::run_kvprof("profile --endpoint " + server->base_url() +
                                  " --gpu-source prometheus=" + prom_url +
                                  " --gpu-selector '{Hostname=\"node-a\"}' --gpu-interval-ms 200 " +
                                  grid_flags() + " --output-dir " + out.string());
  ASSERT_EQ(r.rc, 0) << r.out;
  const fs::path run = only_run(out);
  std::ifstream in(run / "summary.json");
  const json summary = json::parse(in);
  EXPECT_EQ(summary["memory_source"], "prometheus");
  EXPECT_EQ(summary["gpus"][0]["name"], "NVIDIA H100 80GB HBM3");
  const auto used = device_used(run / "gpu_mem_trace.csv");
  ASSERT_GE(used.size(), 5U);
  EXPECT_EQ(*std::min_element(used.begin(), used.end()), idle_used_mib_bytes(*server));

  const auto other = test::run_kvprof(
      "profile --endpoint " + server->base_url() + " --gpu-source prometheus=" + prom_url +
      " --gpu-selector '{Hostname=\"node-b\"}' " + grid_flags() + " --output-dir " + out.string());
  EXPECT_EQ(other.rc, 2) << other.out;
  EXPECT_NE(other.out.find("no GPU framebuffer series"), std::string::npos) << other.out;
}

// A proxy in front of Prometheus that answers instant queries 7 to 13 with HTTP 503 (a network
// or Prometheus outage during the run) and passes everything else on, one connection a request.
class OutageProxy {
 public:
  explicit OutageProxy(std::string upstream)
      : m_upstream(std::move(upstream)),
        m_server([this](testing::ScriptedHttpServer::Connection& c, uint64_t) {
          const std::string& head = c.request_head();
          const auto start = head.find(' ');
          const auto end = head.find(' ', start + 1);
          const std::string target = head.substr(start + 1, end - start - 1);
          std::string status = "502 Bad Gateway";
          std::string body = R"({"status":"error","error":"proxy: no answer"})";
          if (target.starts_with("/api/v1/query_range")) ++range_queries;
          if (target.starts_with("/api/v1/query?") && ++instant_queries >= 7 &&
              instant_queries <= 13) {
            status = "503 Service Unavailable";
            body = R"({"status":"error","errorType":"unavailable","error":"outage"})";
          } else if (auto a = client::http_get(m_upstream + target); a) {
            status = std::to_string(a->status) + (a->status == 200 ? " OK" : " Error");
            body = a->body;
          }
          c.write("HTTP/1.1 " + status + "\r\nContent-Type: application/json\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
          return testing::AfterResponse::close;
        }) {}

  [[nodiscard]] std::string url() const { return m_server.url(""); }

  std::atomic<int> instant_queries{0};
  std::atomic<int> range_queries{0};

 private:
  std::string m_upstream;
  testing::ScriptedHttpServer m_server;
};

// t_mono_ns of every row of a trace, in file order.
std::vector<int64_t> row_times(const fs::path& trace) {
  std::ifstream in(trace);
  std::string line;
  std::vector<int64_t> out;
  std::getline(in, line);
  while (std::getline(in, line))
    out.push_back(std::stoll(line.substr(0, line.find(','))));
  return out;
}

TEST_F(ProfileThroughPrometheus, AnOutageDuringTheRunIsFilledFromItsHistory) {
  OutageProxy proxy(prom->url);

  const fs::path out = dir.path / "results";
  const auto r = test::run_kvprof("profile --endpoint " + server->base_url() +
                                  " --gpu-source prometheus=" + proxy.url() +
                                  " --gpu-selector '{Hostname=\"node-a\"}' --gpu-interval-ms 200 " +
                                  grid_flags() + " --output-dir " + out.string());
  ASSERT_EQ(r.rc, 0) << r.out;
  ASSERT_GT(proxy.instant_queries.load(), 13) << "the run ended before the outage did";
  const fs::path run = only_run(out);
  std::ifstream in(run / "summary.json");
  const json summary = json::parse(in);
  EXPECT_GE(summary["sampler"]["failed_queries"].get<int>(), 7);
  const json& gaps = summary["gpu_gaps"];
  ASSERT_TRUE(gaps.is_object()) << summary.dump(1);
  EXPECT_EQ(gaps["history"], "Prometheus query_range");
  EXPECT_TRUE(gaps["error"].is_null()) << gaps.dump();
  ASSERT_GE(gaps["gaps"].size(), 1U) << gaps.dump();
  // Seven failed readings 200 ms apart: a hole of about 1.6 s, read back at the same step.
  EXPECT_GE(gaps["filled_readings"].get<int>(), 4) << gaps.dump();
  EXPECT_GE(proxy.range_queries.load(), 1);
  EXPECT_NE(r.out.find("GPU readings filled from Prometheus query_range: " +
                       std::to_string(gaps["filled_readings"].get<int>())),
            std::string::npos)
      << r.out;
  int filled_in_gaps = 0;
  for (const auto& g : gaps["gaps"]) {
    EXPECT_EQ(g["gpu"], 0);
    EXPECT_GE(g["from_s"].get<double>(), 0.0);
    EXPECT_GT(g["to_s"].get<double>() - g["from_s"].get<double>(), 0.4) << g;
    filled_in_gaps += g["filled_readings"].get<int>();
  }
  EXPECT_EQ(filled_in_gaps, gaps["filled_readings"].get<int>());
  for (const auto& w : summary["warnings"])
    EXPECT_EQ(w.get<std::string>().find("gap"), std::string::npos) << w;

  // The filled readings are device rows among the live ones, in time order, and they are the
  // simulated GPU's memory as Prometheus scraped it.
  const auto times = row_times(run / "gpu_mem_trace.csv");
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  const auto used = device_used(run / "gpu_mem_trace.csv");
  EXPECT_EQ(used.size(), summary["sampler"]["device_rows"].get<size_t>() +
                             gaps["filled_readings"].get<size_t>());
  EXPECT_EQ(*std::min_element(used.begin(), used.end()), idle_used_mib_bytes(*server));
  EXPECT_LE(*std::max_element(used.begin(), used.end()), server->config().total_bytes);
  for (const uint64_t u : used)
    EXPECT_EQ(u % k_mib, 0U);
}

}  // namespace
}  // namespace kvprof
