// Test-only base fixture for tests that load the fake libnvidia-ml.so.1 (tests/fake_nvml): the
// fake's environment variables are unset around each test, and each test gets its own folder.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

namespace kvprof::test {

// The fake NVML reads these at nvmlInit / per call; tests must not leak them to each other.
inline void clear_fake_nvml_env() {
  for (const char* v :
       {"KVPROF_FAKE_NVML_GPUS", "KVPROF_FAKE_NVML_SCRIPT", "KVPROF_FAKE_NVML_LIVE",
        "KVPROF_FAKE_NVML_DISABLE", "KVPROF_FAKE_NVML_FAIL", "KVPROF_NVML_LIBRARY"}) {
    ::unsetenv(v);
  }
}

// m_dir is a fresh folder <TempDir>/<prefix>_<pid>_<test name>, removed after the test.
class FakeNvmlTest : public ::testing::Test {
 protected:
  explicit FakeNvmlTest(std::string prefix) : m_prefix(std::move(prefix)) {}
  void SetUp() override {
    clear_fake_nvml_env();
    m_dir = std::filesystem::path(::testing::TempDir()) /
            fmt::format("{}_{}_{}", m_prefix, ::getpid(),
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override {
    clear_fake_nvml_env();
    std::error_code ec;
    std::filesystem::remove_all(m_dir, ec);
  }
  std::filesystem::path m_dir;

 private:
  std::string m_prefix;
};

}  // namespace kvprof::test
