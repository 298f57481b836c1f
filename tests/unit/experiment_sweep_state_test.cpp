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
  r.figures.peak_used_bytes = 123;
  r.runs = {{"run_a", "/r/run_a"}, {"run_b", "/r/run_b"}};
  r.conditions["in64_out4_c1_low"] = {.peak_used_bytes = 5e10, .n_ok = 4, .run = 0};
  r.conditions["in64_out4_c2_low"] = {.ttft_p50_ms = 12.25, .run = 1, .completed = false};
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
  EXPECT_EQ(b.figures.peak_used_bytes, 123);
  EXPECT_FALSE(b.figures.kv_cache_bytes.has_value());
  ASSERT_EQ(b.runs.size(), 2U);
  EXPECT_EQ(b.runs[1].run_dir, "/r/run_b");
  ASSERT_EQ(b.conditions.size(), 2U);
  const auto& c1 = b.conditions.at("in64_out4_c1_low");
  EXPECT_EQ(c1.peak_used_bytes, 5e10);
  EXPECT_EQ(c1.n_ok, 4);
  EXPECT_FALSE(c1.ttft_p50_ms.has_value());
  EXPECT_TRUE(c1.completed);
  const auto& c2 = b.conditions.at("in64_out4_c2_low");
  EXPECT_EQ(c2.ttft_p50_ms, 12.25);
  EXPECT_EQ(c2.run, 1);
  EXPECT_FALSE(c2.completed);
  EXPECT_EQ(b.completed_conditions(), std::set<std::string>{"in64_out4_c1_low"});
  EXPECT_TRUE(b.finished());
  // Started afresh, its earlier conditions are gone from the files too.
  state.records[r.fingerprint].conditions.clear();
  ASSERT_TRUE(save_state(m_dir, state, &r.fingerprint).has_value());
  const auto again = load_state(m_dir);
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(again->records.at(r.fingerprint).conditions.empty());
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
      std::string(R"({"schema_version": 3, "configurations": []})"),
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

TEST_F(SweepStateFile, AStateOfTheFirstLayoutReadsWithItsFigures) {
  // Written by kvprof before the conditions moved to their own files: "measured" inline.
  std::ofstream(m_dir / "sweep_state.json") << R"({"schema_version": 1, "name": "old",
    "configurations": [{"fingerprint": "f1", "status": "interrupted", "run_id": "r1",
    "run_dir": "/x/r1", "measured": {"peak_used_bytes": 7, "tokens_per_second": null,
    "conditions": {"in64_out4_c1_low": {"n_ok": 4, "ttft_p50_ms": 1.5}}}}]})";
  const auto state = load_state(m_dir);
  ASSERT_TRUE(state.has_value()) << state.error().message;
  const ConfigRecord& r = state->records.at("f1");
  EXPECT_EQ(r.figures.peak_used_bytes, 7);
  ASSERT_EQ(r.runs.size(), 1U);
  EXPECT_EQ(r.runs[0].run_id, "r1");
  EXPECT_EQ(r.conditions.at("in64_out4_c1_low").n_ok, 4);
  EXPECT_EQ(r.completed_conditions().size(), 1U);
}

TEST_F(SweepStateFile, AConditionsFileThatIsNotThisConfigurationsIsAnInputError) {
  ConfigRecord r;
  r.fingerprint = "abc";
  r.runs = {{"r1", "/r1"}};
  const std::string head =
      R"({"schema_version": 1, "fingerprint": "abc", "columns": ["condition_id", "run",)"
      R"( "completed", "n_ok"], "rows": )";
  EXPECT_TRUE(parse_conditions(head + R"([["c1", 0, true, 3]]})", "f.json", r).has_value());
  EXPECT_EQ(r.conditions.at("c1").n_ok, 3);
  const std::vector<std::string> bad = {
      R"({"schema_version": 1, "fingerprint": "other", "columns": [], "rows": []})",
      head + R"([["c1", 1, true, 3]]})",        // run 1 of a state with one
      head + R"([["c1", 0, true]]})",           // a value short
      head + R"([["c1", 0, "yes", 3]]})",       // completed not a boolean
      head + R"([["c1", 0, true, "three"]]})",  // a figure not a number
      head + R"({"c1": [0, true, 3]}})",        // rows not a list
  };
  for (const auto& text : bad) {
    ConfigRecord copy = r;
    const auto read = parse_conditions(text, "f.json", copy);
    ASSERT_FALSE(read.has_value()) << text;
    EXPECT_EQ(read.error().kind, ErrorKind::input);
    EXPECT_TRUE(read.error().message.starts_with("f.json: not a sweep conditions file ("))
        << read.error().message;
    EXPECT_EQ(copy.conditions.size(), 1U) << "a bad file changed the record: " << text;
  }
}

TEST(SweepTakeRun, ALaterRunReplacesItsConditionsAndKeepsTheHighestPeak) {
  const nlohmann::json first = {
      {"run_id", "r1"},
      {"memory_measurements", {{"peak", {{"total_bytes", 900}}}}},
      {"latency_stats", {{"tokens_per_second", 10.0}}},
      {"conditions",
       {{{"condition_id", "c1"}, {"status", "completed"}, {"n_ok", 4}, {"ttft_ms", {{"p50", 2.0}}}},
        {{"condition_id", "c2"}, {"status", "interrupted"}, {"n_ok", 1}}}}};
  const nlohmann::json second = {
      {"run_id", "r2"},
      {"memory_measurements", {{"peak", {{"total_bytes", 500}}}}},
      {"latency_stats", {{"tokens_per_second", 20.0}}},
      {"conditions", {{{"condition_id", "c2"}, {"status", "completed"}, {"n_ok", 4}}}}};
  const auto first_run = results::read_run_summary(first, {}, "/r1");
  const auto second_run = results::read_run_summary(second, {}, "/r2");
  ASSERT_TRUE(first_run.has_value() && second_run.has_value());
  ConfigRecord r;
  take_run(*first_run, {"r1", "/r1"}, r);
  EXPECT_EQ(r.completed_conditions(), std::set<std::string>{"c1"});
  take_run(*second_run, {"r2", "/r2"}, r);
  EXPECT_EQ(r.run_id, "r2");
  ASSERT_EQ(r.runs.size(), 2U);
  EXPECT_EQ(r.figures.peak_used_bytes, 900);     // the highest of the two runs
  EXPECT_EQ(r.figures.tokens_per_second, 20.0);  // the last run's
  EXPECT_EQ(r.conditions.at("c1").run, 0);
  EXPECT_EQ(r.conditions.at("c1").ttft_p50_ms, 2.0);
  EXPECT_FALSE(r.conditions.at("c1").peak_used_bytes.has_value());  // not in the summary
  EXPECT_EQ(r.conditions.at("c2").run, 1);
  EXPECT_EQ(r.conditions.at("c2").n_ok, 4);
  EXPECT_EQ(r.completed_conditions(), (std::set<std::string>{"c1", "c2"}));
}

}  // namespace
}  // namespace kvprof::experiment
