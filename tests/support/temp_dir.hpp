// Test-only: a fresh folder per test, named by a prefix, the process id and the test's name,
// removed afterwards — as a fixture base (TempDirTest) or as a scoped object (ScopedTempDir).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

namespace kvprof::test {

// A new empty folder under the test temp dir: PREFIX_PID_TESTNAME; removed when destroyed.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& prefix) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = std::filesystem::path(::testing::TempDir()) /
           (prefix + "_" + std::to_string(::getpid()) + "_" + (info ? info->name() : "suite"));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScopedTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  std::filesystem::path path;
};

// A fixture whose m_dir is a fresh folder for each test (see ScopedTempDir).
class TempDirTest : public ::testing::Test {
 protected:
  explicit TempDirTest(std::string prefix) : m_prefix(std::move(prefix)) {}
  void SetUp() override {
    m_temp.emplace(m_prefix);
    m_dir = m_temp->path;
  }
  void TearDown() override { m_temp.reset(); }

  std::filesystem::path m_dir;

 private:
  std::string m_prefix;
  std::optional<ScopedTempDir> m_temp;
};

}  // namespace kvprof::test
