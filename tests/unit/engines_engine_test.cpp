// The engine rows: one per engine, in the enum's order, every name and alias found, and the
// planner taking only the engines it plans.
#include "kvprof/engines/engine.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace kvprof::engines {
namespace {

TEST(EngineRows, OneRowPerEngineInTheEnumsOrderWithUniqueNames) {
  const auto rows = engine_rows();
  ASSERT_EQ(rows.size(), static_cast<size_t>(Engine::tgi) + 1);
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
    // An engine with parallel flags names both; a planned engine has a display name.
    EXPECT_EQ(rows[i].tensor_parallel_flag.empty(), rows[i].pipeline_parallel_flag.empty());
    EXPECT_FALSE(rows[i].display_name.empty());
  }
  EXPECT_EQ(find_engine("  LLaMA.cpp "), Engine::llamacpp);
  EXPECT_FALSE(find_engine("ollama").has_value());
}

TEST(EngineRows, ThePlannerTakesOnlyPlannedEngines) {
  EXPECT_EQ(parse_planned_engine("tensorrt-llm"), Engine::trtllm);
  EXPECT_EQ(parse_planned_engine("transformers"), Engine::hf);
  for (const std::string bad : {"tgi", "unknown", "ollama"}) {
    const auto e = parse_planned_engine(bad);
    ASSERT_FALSE(e.has_value()) << bad;
    EXPECT_EQ(e.error().kind, ErrorKind::usage);
    EXPECT_EQ(e.error().message,
              "unknown engine '" + bad + "' (use vllm, sglang, trtllm, llamacpp or hf)");
  }
  EXPECT_EQ(engine_row(Engine::sglang).tensor_parallel_flag, "--tp-size");
  EXPECT_EQ(engine_row(Engine::vllm).metrics_prefix, "vllm:");
}

}  // namespace
}  // namespace kvprof::engines
