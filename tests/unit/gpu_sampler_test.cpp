// Sampler: steady schedule and row counts, rows on disk while running, peaks, processes, host
// memory, write errors; and the `kvprof sample` command run as a program (fake NVML, Ctrl-C,
// /dev/full, no driver).
#include "kvprof/gpu/sampler.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "kvprof/gpu/nvml.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "kvprof/util/clock.hpp"
#include "kvprof/util/strings.hpp"
#include "support/fake_nvml_fixture.hpp"

namespace kvprof::gpu {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::vector<std::string> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

class SamplerTest : public test::FakeNvmlTest {
 protected:
  SamplerTest() : FakeNvmlTest("kvprof_sampler") {}
};

DeviceMemory memory(unsigned gpu, uint64_t used) {
  DeviceMemory m;
  m.gpu = gpu;
  m.total_bytes = 80 * (1ULL << 30);
  m.reserved_bytes = 1ULL << 29;
  m.used_bytes = used;
  m.free_bytes = *m.total_bytes - *m.reserved_bytes - used;
  return m;
}

TEST_F(SamplerTest, SteadyScheduleRowCountAndMonotonicTimestamps) {
  FakeSource source(2);
  source.set_memory(memory(0, 1000));
  source.set_memory(memory(1, 2000));
  SamplerOptions options;
  options.interval_ms = 10;
  options.process_interval_ms = 0;
  options.gpu_trace_path = (m_dir / "trace.csv").string();
  Sampler sampler(&source, options);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t t0_ns = monotonic_now_ns();
  ASSERT_TRUE(sampler.start().has_value());
  std::this_thread::sleep_for(500ms);
  ASSERT_TRUE(sampler.stop().has_value());
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

  const auto lines = read_lines(m_dir / "trace.csv");
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], k_gpu_trace_header);
  std::vector<int64_t> gpu0_times;
  int64_t last = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto f = split(lines[i], ',');
    ASSERT_EQ(f.size(), 9U) << lines[i];
    EXPECT_EQ(f[2], "device");
    EXPECT_EQ(f[4], "");  // no pid on device rows
    const int64_t t = std::stoll(f[0]);
    EXPECT_GE(t, last) << "row " << i;
    last = t;
    EXPECT_GT(std::stoll(f[1]), 1'600'000'000'000LL);  // wall clock ms after 2020
    if (f[3] == "0") {
      gpu0_times.push_back(t);
      EXPECT_EQ(f[8], "1000");
    } else {
      EXPECT_EQ(f[8], "2000");
    }
  }
  const auto stats = sampler.stats();
  EXPECT_EQ(stats.device_rows, lines.size() - 1);
  // At most one row per GPU per 10 ms slot since start (plus the one at t=0); under load some
  // slots may be skipped, but most must be there.
  const double max_rows = elapsed_ms / 10.0 + 1;
  EXPECT_LE(gpu0_times.size(), max_rows);
  EXPECT_GE(gpu0_times.size() + stats.missed_ticks, 0.6 * 500 / 10);
  EXPECT_GE(gpu0_times.size(), 0.5 * 500 / 10);
  // No drift, never early: sample i is not taken before start + i * interval (start >= t0).
  if (stats.missed_ticks == 0) {
    for (size_t i = 0; i < gpu0_times.size(); ++i) {
      EXPECT_GE(gpu0_times[i], t0_ns + static_cast<int64_t>(i) * 10'000'000) << "sample " << i;
    }
  }
}

TEST_F(SamplerTest, RowsAreOnDiskBeforeStopAndPeaksTracked) {
  FakeSource source(1);
  source.set_memory(memory(0, 5000));
  SamplerOptions options;
  options.interval_ms = 5;
  options.process_interval_ms = 0;
  options.gpu_trace_path = (m_dir / "trace.csv").string();
  std::atomic<int> callbacks{0};
  options.on_device_sample = [&](const DeviceSample&) { ++callbacks; };
  Sampler sampler(&source, options);
  ASSERT_TRUE(sampler.start().has_value());
  std::this_thread::sleep_for(100ms);
  source.set_memory(memory(0, 9000));
  std::this_thread::sleep_for(100ms);
  source.set_memory(memory(0, 7000));
  std::this_thread::sleep_for(100ms);
  const auto while_running = read_lines(m_dir / "trace.csv");
  EXPECT_GT(while_running.size(), 10U);
  const auto peaks = sampler.gpu_peaks();
  ASSERT_EQ(peaks.size(), 1U);
  EXPECT_EQ(peaks[0].peak_used_bytes.value(), 9000U);
  EXPECT_EQ(peaks[0].latest->memory.used_bytes.value(), 7000U);
  EXPECT_GT(peaks[0].peak_t_mono_ns, 0);
  ASSERT_TRUE(sampler.stop().has_value());
  EXPECT_EQ(static_cast<uint64_t>(callbacks.load()), sampler.stats().device_rows);
  EXPECT_GE(read_lines(m_dir / "trace.csv").size(), while_running.size());
}

TEST_F(SamplerTest, MissingValuesAreEmptyCellsAndFailuresAreCounted) {
  FakeSource source(1);
  DeviceMemory v1;  // as from the v1 query: no reserved
  v1.total_bytes = 100;
  v1.used_bytes = 60;
  v1.free_bytes = 40;
  v1.used_includes_reserved = true;
  source.set_memory(v1);
  SamplerOptions options;
  options.interval_ms = 5;
  options.process_interval_ms = 0;
  options.gpu_trace_path = (m_dir / "trace.csv").string();
  Sampler sampler(&source, options);
  ASSERT_TRUE(sampler.start().has_value());
  std::this_thread::sleep_for(50ms);
  source.set_failure(Error{ErrorKind::driver, "GPU is lost"});
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(sampler.stop().has_value());
  const auto lines = read_lines(m_dir / "trace.csv");
  ASSERT_GE(lines.size(), 2U);
  EXPECT_TRUE(lines[1].ends_with(",device,0,,100,,40,60")) << lines[1];
  const auto stats = sampler.stats();
  EXPECT_GT(stats.failed_queries, 0U);
  EXPECT_EQ(stats.last_query_error, "GPU is lost");
}

TEST_F(SamplerTest, ProcessRowsFromFakeNvmlLiveFile) {
  const fs::path live = m_dir / "live.txt";
  std::ofstream(live) << "gpu 0 85000000000 500000000 7000000000\nproc 0 4242 6500000000\n";
  ::setenv("KVPROF_FAKE_NVML_LIVE", live.c_str(), 1);
  auto nvml = NvmlSource::open(KVPROF_FAKE_NVML_PATH);
  ASSERT_TRUE(nvml.has_value()) << nvml.error().message;
  SamplerOptions options;
  options.interval_ms = 10;
  options.process_interval_ms = 50;
  options.gpu_trace_path = (m_dir / "trace.csv").string();
  Sampler sampler(nvml->get(), options);
  ASSERT_TRUE(sampler.start().has_value());
  std::this_thread::sleep_for(220ms);
  ASSERT_TRUE(sampler.stop().has_value());
  ::unsetenv("KVPROF_FAKE_NVML_LIVE");
  size_t process_rows = 0;
  size_t device_rows = 0;
  for (const auto& line : read_lines(m_dir / "trace.csv")) {
    const auto f = split(line, ',');
    if (f.size() == 9 && f[2] == "process") {
      ++process_rows;
      EXPECT_EQ(f[4], "4242");
      EXPECT_EQ(f[8], "6500000000");
      EXPECT_EQ(f[5] + f[6] + f[7], "");
    } else if (f.size() == 9 && f[2] == "device") {
      ++device_rows;
      EXPECT_EQ(f[6], "500000000");
      EXPECT_EQ(f[8], "7000000000");
    }
  }
  EXPECT_GE(process_rows, 3U);  // at 0, 50, 100, 150, 200 ms
  EXPECT_LE(process_rows, 6U);
  EXPECT_GT(device_rows, process_rows);
  EXPECT_EQ(sampler.stats().process_rows, process_rows);
}

TEST_F(SamplerTest, HostMemoryOfOwnProcess) {
  SamplerOptions options;
  options.host_pid = ::getpid();
  options.host_interval_ms = 10;
  options.host_trace_path = (m_dir / "host.csv").string();
  Sampler sampler(nullptr, options);
  ASSERT_TRUE(sampler.start().has_value());
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(sampler.stop().has_value());
  const auto lines = read_lines(m_dir / "host.csv");
  ASSERT_GE(lines.size(), 3U);
  EXPECT_EQ(lines[0], k_host_trace_header);
  const auto f = split(lines[1], ',');
  ASSERT_EQ(f.size(), 5U);
  EXPECT_EQ(f[2], std::to_string(::getpid()));
  EXPECT_GT(std::stoull(f[3]), 1ULL << 20);
  const auto host = sampler.host_peak().value();
  EXPECT_GE(host.peak_rss_bytes.value(), std::stoull(f[3]));
  EXPECT_FALSE(host.exited);
}

TEST_F(SamplerTest, WriteErrorStopsWithIoError) {
  FakeSource source(1);
  SamplerOptions options;
  options.gpu_trace_path = "/dev/full";
  Sampler sampler(&source, options);
  auto started = sampler.start();
  ASSERT_FALSE(started.has_value());
  EXPECT_EQ(started.error().kind, ErrorKind::io);
  EXPECT_NE(started.error().message.find("No space left on device"), std::string::npos)
      << started.error().message;
}

TEST_F(SamplerTest, RejectsBadOptions) {
  FakeSource source(2);
  SamplerOptions options;
  options.gpu_trace_path = (m_dir / "t.csv").string();
  options.gpus = {0, 2};
  Sampler bad_gpu(&source, options);
  auto r = bad_gpu.start();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().kind, ErrorKind::usage);
  options.gpus = {};
  options.interval_ms = 0;
  Sampler bad_interval(&source, options);
  EXPECT_FALSE(bad_interval.start().has_value());
}

// ---- the `kvprof sample` command as a program ----

sys::CommandOptions fake_nvml_env(const fs::path& live) {
  sys::CommandOptions o;
  o.timeout = 20s;
  o.env = {{"KVPROF_NVML_LIBRARY", KVPROF_FAKE_NVML_PATH},
           {"KVPROF_FAKE_NVML_GPUS", "2"},
           {"KVPROF_FAKE_NVML_LIVE", live.string()}};
  return o;
}

TEST_F(SamplerTest, CommandSamplesForDurationAndSummarises) {
  std::ofstream(m_dir / "live.txt") << "gpu 0 85000000000 500000000 3000000000\n"
                                       "gpu 1 85000000000 500000000 4000000000\n";
  const fs::path trace = m_dir / "gpu.csv";
  auto r = sys::run_command({KVPROF_BIN, "sample", "-o", trace.string(), "--duration", "0.3",
                             "--interval-ms", "10", "--gpus", "1", "--json"},
                            fake_nvml_env(m_dir / "live.txt"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  const auto summary = nlohmann::json::parse(r->stdout_text);
  ASSERT_EQ(summary["gpus"].size(), 1U);
  EXPECT_EQ(summary["gpus"][0]["gpu"], 1);
  EXPECT_EQ(summary["gpus"][0]["peak_used_bytes"], 4000000000ULL);
  const auto lines = read_lines(trace);
  EXPECT_GE(lines.size(), 15U);
  EXPECT_LE(lines.size(), 40U);
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto f = split(lines[i], ',');
    ASSERT_EQ(f.size(), 9U);
    if (f[2] == "device") {
      EXPECT_EQ(f[3], "1");
    }
  }
}

TEST_F(SamplerTest, CommandCtrlCFlushesAndExits130) {
  std::ofstream(m_dir / "live.txt") << "gpu 0 1000 10 100\n";
  const fs::path trace = m_dir / "gpu.csv";
  auto options = fake_nvml_env(m_dir / "live.txt");
  std::thread killer;
  options.on_spawn = [&](pid_t pid) {
    killer = std::thread([pid, trace] {
      // Wait until sampling is under way (a few rows on disk), then press Ctrl-C.
      for (int i = 0; i < 1000 && read_lines(trace).size() < 5; ++i)
        std::this_thread::sleep_for(10ms);
      ::kill(pid, SIGINT);
    });
  };
  auto r = sys::run_command({KVPROF_BIN, "sample", "-o", trace.string(), "--interval-ms", "10"},
                            options);
  killer.join();
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->exit_code, 130) << r->stderr_text;
  EXPECT_NE(r->stderr_text.find("interrupted"), std::string::npos);
  const auto lines = read_lines(trace);
  EXPECT_GE(lines.size(), 5U);
  EXPECT_EQ(std::count(lines.back().begin(), lines.back().end(), ','), 8);  // last row complete
}

TEST_F(SamplerTest, CommandFullDiskIsOneErrorLineExit1) {
  std::ofstream(m_dir / "live.txt") << "gpu 0 1000 10 100\n";
  auto r = sys::run_command({KVPROF_BIN, "sample", "-o", "/dev/full", "--duration", "1"},
                            fake_nvml_env(m_dir / "live.txt"));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_EQ(r->stderr_text, "kvprof: error: cannot write '/dev/full': No space left on device\n");
}

TEST_F(SamplerTest, CommandWithoutDriverFailsUnlessHostOnly) {
  sys::CommandOptions o;
  o.env = {{"KVPROF_NVML_LIBRARY", (m_dir / "absent.so").string()}};
  auto r = sys::run_command(
      {KVPROF_BIN, "sample", "-o", (m_dir / "gpu.csv").string(), "--duration", "0.1"}, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_TRUE(r->stderr_text.starts_with("kvprof: error: no NVIDIA driver")) << r->stderr_text;
  EXPECT_EQ(std::count(r->stderr_text.begin(), r->stderr_text.end(), '\n'), 1);

  const fs::path host = m_dir / "host.csv";
  r = sys::run_command(
      {KVPROF_BIN, "sample", "-o", (m_dir / "gpu.csv").string(), "--duration", "0.3", "--pid",
       std::to_string(::getpid()), "--host-trace", host.string(), "--host-interval-ms", "20"},
      o);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  // The GPU trace asked for is there with its header, and the note says why it is empty.
  const auto gpu_lines = read_lines(m_dir / "gpu.csv");
  ASSERT_EQ(gpu_lines.size(), 1U);
  EXPECT_EQ(gpu_lines[0], k_gpu_trace_header);
  EXPECT_NE(r->stderr_text.find("gpu.csv holds only its header"), std::string::npos)
      << r->stderr_text;
  const auto lines = read_lines(host);
  ASSERT_GE(lines.size(), 5U);
  EXPECT_EQ(split(lines[1], ',')[2], std::to_string(::getpid()));
}

}  // namespace
}  // namespace kvprof::gpu
