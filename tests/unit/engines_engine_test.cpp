// The engine rows: one identity row and one row of functions per engine, in the enum's order,
// every name and alias found, the planner taking only the engines it plans, and each front door
// of the registry going to the engine's own function.
#include "kvprof/engines/engine.hpp"
#include "kvprof/engines/registry.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kvprof::engines {
namespace {

TEST(EngineRows, OneRowPerEngineInTheEnumsOrderWithUniqueNames) {
  const auto rows = engine_rows();
  ASSERT_EQ(rows.size(), static_cast<size_t>(Engine::ollama) + 1);
  std::set<std::string_view> spellings;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(rows[i].id), i);
    EXPECT_EQ(&engine_row(rows[i].id), &rows[i]);
    EXPECT_EQ(engine_name(rows[i].id), rows[i].name);
    EXPECT_TRUE(spellings.insert(rows[i].name).second) << rows[i].name;
    EXPECT_EQ(find_engine(rows[i].name), rows[i].id);
    for (const auto alias : rows[i].aliases) {
      EXPECT_TRUE(spellings.insert(alias).second) << alias;
      EXPECT_EQ(find_engine(alias), rows[i].id) << alias;
    }
    // An engine with a pipeline flag has a tensor one (TGI has only --num-shard); a planned
    // engine has a display name.
    if (!rows[i].pipeline_parallel_flag.empty()) {
      EXPECT_FALSE(rows[i].tensor_parallel_flag.empty()) << rows[i].name;
    }
    EXPECT_FALSE(rows[i].display_name.empty());
  }
  EXPECT_EQ(find_engine("  LLaMA.cpp "), Engine::llamacpp);
  EXPECT_EQ(find_engine("ollama"), Engine::ollama);
  EXPECT_FALSE(find_engine("mlc-llm").has_value());
}

TEST(EngineRows, ThePlannerTakesOnlyPlannedEngines) {
  EXPECT_EQ(parse_planned_engine("tensorrt-llm"), Engine::trtllm);
  EXPECT_EQ(parse_planned_engine("transformers"), Engine::hf);
  EXPECT_EQ(parse_planned_engine("text-generation-inference"), Engine::tgi);
  EXPECT_EQ(parse_planned_engine("ollama"), Engine::ollama);
  for (const std::string bad : {"unknown", "mlc-llm"}) {
    const auto e = parse_planned_engine(bad);
    ASSERT_FALSE(e.has_value()) << bad;
    EXPECT_EQ(e.error().kind, ErrorKind::usage);
    EXPECT_EQ(e.error().message, "unknown engine '" + bad +
                                     "' (use vllm, sglang, trtllm, llamacpp, hf, tgi or ollama)");
  }
  EXPECT_EQ(engine_row(Engine::sglang).tensor_parallel_flag, "--tp-size");
  EXPECT_EQ(engine_row(Engine::tgi).tensor_parallel_flag, "--num-shard");
  EXPECT_EQ(engine_row(Engine::vllm).metrics_prefix, "vllm:");
}

TEST(EngineRegistry, OneRowOfFunctionsPerEngineAgreeingWithItsIdentity) {
  for (const auto& row : engine_rows()) {
    const auto& fns = engine_functions(row.id);
    EXPECT_EQ(fns.id, row.id) << row.name;
    // Metrics are read for exactly the engines whose families kvprof recognises by prefix.
    EXPECT_EQ(fns.read_metrics != nullptr, !row.metrics_prefix.empty()) << row.name;
    // Only a planned engine can have modelled releases.
    if (fns.parse_release != nullptr) {
      EXPECT_NE(fns.plan, nullptr) << row.name;
    }
    if (fns.log_reader != nullptr) {
      const auto reader = fns.log_reader();
      EXPECT_EQ(reader.engine, row.id) << row.name;
      EXPECT_TRUE(reader.read && reader.is_marker != nullptr) << row.name;
    }
  }
  const auto& unknown = engine_functions(Engine::unknown);
  EXPECT_TRUE(unknown.plan == nullptr && unknown.parse_release == nullptr &&
              unknown.log_reader == nullptr && unknown.read_metrics == nullptr);
  EXPECT_EQ(log_read_engine_names(), (std::vector<std::string_view>{"vllm", "sglang", "trtllm",
                                                                    "llamacpp", "tgi", "ollama"}));
}

TEST(EngineRegistry, ReleasesGoToTheEnginesOwnTable) {
  EXPECT_EQ(parse_engine_version(Engine::vllm, "v0.10.1").value(), "v0.10");
  EXPECT_EQ(parse_engine_version(Engine::trtllm, "1.1.0rc3").value(), "1.x");
  EXPECT_EQ(parse_engine_version(Engine::llamacpp, "").value(), "v0.5.0 (b11146)");
  EXPECT_EQ(parse_engine_version(Engine::llamacpp, "b5640").value(), "b5640");
  const auto none = parse_engine_version(Engine::hf, "4.50");
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().message,
            "--engine-version applies to --engine vllm, sglang, trtllm, llamacpp, tgi or ollama; "
            "kvprof models hf without versions");
  estimate::EngineSettings s;
  s.engine = Engine::sglang;
  s.engine_version = "no such release";
  EXPECT_EQ(modelled_engine_version(s), parse_engine_version(Engine::sglang, "").value());
  s.engine = Engine::llamacpp;
  EXPECT_EQ(modelled_engine_version(s), "v0.5.0 (b11146)");
  s.engine = Engine::hf;
  EXPECT_EQ(modelled_engine_version(s), "(no version pinned)");
}

TEST(EngineRegistry, EachEnginesLogReaderReadsOnlyItsOwnLines) {
  const std::string vllm_line =
      "(EngineCore pid=1) INFO [gpu_worker.py:436] Available KV cache memory: 61.66 GiB\n";
  EXPECT_EQ(enginelog::parse_engine_log(vllm_line, log_parse_options()).engine, Engine::vllm);
  EXPECT_EQ(
      enginelog::parse_engine_log(vllm_line, log_parse_options(Engine::sglang)).n_recognised_lines,
      0U);
  // Options without readers read nothing: the readers are the engines'.
  EXPECT_EQ(enginelog::parse_engine_log(vllm_line, enginelog::ParseOptions{}).n_recognised_lines,
            0U);
}

}  // namespace
}  // namespace kvprof::engines
