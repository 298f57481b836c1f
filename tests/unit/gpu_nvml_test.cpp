// NvmlSource against the fake libnvidia-ml.so.1 (tests/fake_nvml): the v2 memory struct, the
// replayed script, the live file, processes, the v1/_v2 fallbacks and the missing-library error.
#include "kvprof/gpu/nvml.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "support/fake_nvml_fixture.hpp"

namespace kvprof::gpu {
namespace {

namespace fs = std::filesystem;

class FakeNvml : public test::FakeNvmlTest {
 protected:
  FakeNvml() : FakeNvmlTest("kvprof_nvml") {}
  std::string write_file(const std::string& name, const std::string& text) {
    const fs::path p = m_dir / name;
    std::ofstream(p) << text;
    return p.string();
  }
  static std::unique_ptr<NvmlSource> open_fake() {
    auto source = NvmlSource::open(KVPROF_FAKE_NVML_PATH);
    EXPECT_TRUE(source.has_value()) << (source ? "" : source.error().message);
    return source ? std::move(*source) : nullptr;
  }
};

TEST_F(FakeNvml, ReadsNamesVersionsAndV2Memory) {
  ::setenv("KVPROF_FAKE_NVML_GPUS", "2", 1);
  ::setenv("KVPROF_FAKE_NVML_SCRIPT",
           write_file("script.txt", "1 80000000000 500000000 1234567890\n").c_str(), 1);
  auto nvml = open_fake();
  ASSERT_TRUE(nvml);
  EXPECT_TRUE(nvml->has_memory_v2());
  EXPECT_EQ(nvml->device_count().value(), 2U);
  const DeviceInfo info = nvml->device_info(1).value();
  EXPECT_EQ(info.name.value(), "NVIDIA H100 80GB HBM3 (fake)");
  EXPECT_TRUE(info.uuid.value().starts_with("GPU-fake-1")) << *info.uuid;
  const DriverInfo driver = nvml->driver_info();
  EXPECT_EQ(driver.driver_version.value(), "550.54.15");
  EXPECT_EQ(format_cuda_version(driver.cuda_driver_version.value()), "12.4");

  // The fake answers ARGUMENT_VERSION_MISMATCH unless version = sizeof | 2 << 24, so values
  // coming back prove the struct and its version are right.
  const DeviceMemory mem = nvml->sample_device(1).value();
  EXPECT_FALSE(mem.used_includes_reserved);
  EXPECT_EQ(mem.total_bytes.value(), 80000000000ULL);
  EXPECT_EQ(mem.reserved_bytes.value(), 500000000ULL);
  EXPECT_EQ(mem.used_bytes.value(), 1234567890ULL);
  EXPECT_EQ(mem.free_bytes.value(), 80000000000ULL - 500000000ULL - 1234567890ULL);
  EXPECT_FALSE(nvml->sample_device(2).has_value());
  EXPECT_EQ(nvml->sample_device(2).error().kind, ErrorKind::driver);
}

TEST_F(FakeNvml, ReplaysScriptInOrderPerGpuAndSticksOnLastLine) {
  ::setenv("KVPROF_FAKE_NVML_GPUS", "2", 1);
  ::setenv("KVPROF_FAKE_NVML_SCRIPT",
           write_file("script.txt",
                      "0 1000 10 100\n1 2000 20 900\n0 1000 10 200\n# comment\n0 1000 10 300\n")
               .c_str(),
           1);
  auto nvml = open_fake();
  ASSERT_TRUE(nvml);
  std::vector<uint64_t> gpu0;
  for (int i = 0; i < 5; ++i)
    gpu0.push_back(nvml->sample_device(0).value().used_bytes.value());
  EXPECT_EQ(gpu0, (std::vector<uint64_t>{100, 200, 300, 300, 300}));
  EXPECT_EQ(nvml->sample_device(1).value().used_bytes.value(), 900U);
  EXPECT_EQ(nvml->sample_device(1).value().used_bytes.value(), 900U);
}

TEST_F(FakeNvml, RereadsLiveFileOnEveryCall) {
  const std::string live = write_file("live.txt", "gpu 0 85000000000 600000000 1000\n");
  ::setenv("KVPROF_FAKE_NVML_LIVE", live.c_str(), 1);
  auto nvml = open_fake();
  ASSERT_TRUE(nvml);
  EXPECT_EQ(nvml->sample_device(0).value().used_bytes.value(), 1000U);
  write_file("live.tmp",
             "gpu 0 85000000000 600000000 5000000000\nproc 0 4242 4900000000\n"
             "proc 0 4343 100000000\nproc 1 999 1\n");
  fs::rename(m_dir / "live.tmp", live);
  const DeviceMemory mem = nvml->sample_device(0).value();
  EXPECT_EQ(mem.used_bytes.value(), 5000000000ULL);
  EXPECT_EQ(mem.reserved_bytes.value(), 600000000ULL);
  const auto procs = nvml->sample_processes(0).value();
  ASSERT_EQ(procs.size(), 2U);
  EXPECT_EQ(procs[0].pid, 4242U);
  EXPECT_EQ(procs[0].used_bytes.value(), 4900000000ULL);
  EXPECT_EQ(procs[1].pid, 4343U);
  EXPECT_EQ(procs[1].gpu, 0U);
}

TEST_F(FakeNvml, GrowsProcessBufferPastInitialCapacity) {
  std::string text = "gpu 0 1000 10 100\n";
  for (int pid = 1; pid <= 100; ++pid)
    text += fmt::format("proc 0 {} {}\n", pid, pid * 1000);
  ::setenv("KVPROF_FAKE_NVML_LIVE", write_file("live.txt", text).c_str(), 1);
  auto nvml = open_fake();
  ASSERT_TRUE(nvml);
  const auto procs = nvml->sample_processes(0).value();
  ASSERT_EQ(procs.size(), 100U);
  EXPECT_EQ(procs[99].pid, 100U);
  EXPECT_EQ(procs[99].used_bytes.value(), 100000U);
}

TEST_F(FakeNvml, FallsBackToV1MemoryAndV2Processes) {
  ::setenv("KVPROF_FAKE_NVML_DISABLE", "memory_v2,processes_v3", 1);
  ::setenv("KVPROF_FAKE_NVML_LIVE",
           write_file("live.txt", "gpu 0 1000000 1000 5000\nproc 0 77 4000\n").c_str(), 1);
  auto nvml = open_fake();
  ASSERT_TRUE(nvml);
  const DeviceMemory mem = nvml->sample_device(0).value();
  EXPECT_FALSE(nvml->has_memory_v2());
  EXPECT_TRUE(mem.used_includes_reserved);
  EXPECT_FALSE(mem.reserved_bytes.has_value());  // unknown, not 0
  EXPECT_EQ(mem.used_bytes.value(), 6000U);      // v1: used + reserved
  EXPECT_EQ(mem.total_bytes.value(), 1000000U);
  const auto procs = nvml->sample_processes(0).value();
  ASSERT_EQ(procs.size(), 1U);
  EXPECT_EQ(procs[0].pid, 77U);
}

TEST_F(FakeNvml, QueryFailureIsADriverError) {
  ::setenv("KVPROF_FAKE_NVML_FAIL", "memory", 1);
  auto nvml = open_fake();
  ASSERT_TRUE(nvml);
  auto mem = nvml->sample_device(0);
  ASSERT_FALSE(mem.has_value());
  EXPECT_EQ(mem.error().kind, ErrorKind::driver);
  EXPECT_NE(mem.error().message.find("GPU is lost"), std::string::npos) << mem.error().message;
}

TEST_F(FakeNvml, InitFailureNamesTheNvmlError) {
  ::setenv("KVPROF_FAKE_NVML_FAIL", "init", 1);
  auto nvml = NvmlSource::open(KVPROF_FAKE_NVML_PATH);
  ASSERT_FALSE(nvml.has_value());
  EXPECT_EQ(nvml.error().kind, ErrorKind::driver);
  EXPECT_NE(nvml.error().message.find("Driver Not Loaded"), std::string::npos);
}

TEST_F(FakeNvml, EnvironmentVariableSelectsTheLibrary) {
  ::setenv("KVPROF_NVML_LIBRARY", KVPROF_FAKE_NVML_PATH, 1);
  auto nvml = NvmlSource::open();
  ASSERT_TRUE(nvml.has_value()) << nvml.error().message;
  EXPECT_EQ((*nvml)->library_path(), KVPROF_FAKE_NVML_PATH);
}

TEST_F(FakeNvml, MissingLibraryIsAClearDriverError) {
  auto nvml = NvmlSource::open((m_dir / "libnvidia-ml.so.1").string());
  ASSERT_FALSE(nvml.has_value());
  EXPECT_EQ(nvml.error().kind, ErrorKind::driver);
  EXPECT_TRUE(nvml.error().message.starts_with("no NVIDIA driver")) << nvml.error().message;

  void* real = dlopen(k_nvml_default_library, RTLD_NOW | RTLD_LOCAL);
  if (real != nullptr) {
    dlclose(real);
    GTEST_SKIP() << "this machine has a real NVML";
  }
  auto absent = NvmlSource::open();
  ASSERT_FALSE(absent.has_value());
  EXPECT_EQ(absent.error().message, "no NVIDIA driver (libnvidia-ml.so.1 not found)");
}

TEST_F(FakeNvml, NotAnNvmlLibraryIsRejected) {
  // libc has none of the NVML entry points.
  auto nvml = NvmlSource::open("libc.so.6");
  ASSERT_FALSE(nvml.has_value());
  EXPECT_NE(nvml.error().message.find("not a usable NVML library"), std::string::npos);
}

}  // namespace
}  // namespace kvprof::gpu
