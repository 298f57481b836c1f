// The sweep's state file: what save_state writes reads back the same, and a file that is not a
// state file (broken JSON, a number past a double, wrong types, invalid UTF-8) is an input error
// naming it, never an exception.
#include "kvprof/experiment/sweep_state.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace kvprof::experiment {
namespace {

class SweepStateFile : public test::TempDirTest {
 protected:
  SweepStateFile() : TempDirTest("kvprof_sweep_state") {}
};

TEST_F(SweepStateFile, WhatIsSavedReadsBack) {
  SweepState state;
  state.name = "grid";
  state.config_file = "grid.yaml";
  state.first_started_unix_s = 1700000000.5;
  ConfigRecord r;
  r.fingerprint = "00000000deadbeef";
  r.id = "c1";
  r.status = "done";
  r.attempts = 2;
  r.measured = {{"peak_bytes", 123}};
  state.records[r.fingerprint] = r;
  ASSERT_TRUE(save_state(m_dir, state).has_value());
  const auto back = load_state(m_dir);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->name, "grid");
  EXPECT_EQ(back->first_started_unix_s, 1700000000.5);
  ASSERT_EQ(back->records.size(), 1U);
  const ConfigRecord& b = back->records.at("00000000deadbeef");
  EXPECT_EQ(b.status, "done");
  EXPECT_EQ(b.attempts, 2U);
  EXPECT_EQ(b.measured.at("peak_bytes"), 123);
  EXPECT_TRUE(b.finished());
}

TEST_F(SweepStateFile, NoFileIsAnEmptyState) {
  const auto state = load_state(m_dir);
  ASSERT_TRUE(state.has_value());
  EXPECT_TRUE(state->records.empty());
}

TEST_F(SweepStateFile, AnythingElseIsAnInputErrorNamingTheFile) {
  const std::string path = (m_dir / "sweep_state.json").string();
  const std::vector<std::string> texts = {
      std::string("{"),
      std::string(R"({"schema_version": 2, "configurations": []})"),
      std::string(R"({"schema_version": "1", "configurations": []})"),
      std::string(R"({"schema_version": 1})"),
      std::string(R"({"schema_version": 1, "configurations": {}})"),
      std::string(R"({"schema_version": 1, "configurations": [{"status": "done"}]})"),
      std::string(R"({"schema_version": 1, "configurations": [{"fingerprint": 5}]})"),
      std::string(R"({"schema_version": 1, "first_started_unix_s": 5e400,)"
                  R"( "configurations": []})"),
      std::string("{\"schema_version\": 1, \"name\": \"\xff\", \"configurations\": []}"),
      std::string(R"({"schema_version": 1, "configurations": [{"fingerprint": "f",)"
                  R"( "status": "done", "duration_s": "long"}]})"),
  };
  for (const std::string& text : texts) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    const auto state = load_state(m_dir);
    ASSERT_FALSE(state.has_value()) << text;
    EXPECT_EQ(state.error().kind, ErrorKind::input) << text;
    EXPECT_TRUE(state.error().message.starts_with(path + ": not a sweep state file ("))
        << state.error().message;
    EXPECT_TRUE(state.error().message.ends_with("); move it away to start afresh"))
        << state.error().message;
  }
}

}  // namespace
}  // namespace kvprof::experiment
