// Helpers of the parse_hf_config tests: fixtures under tests/fixtures/hf/ and error checks.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>

#include "kvprof/model/hf_config.hpp"

namespace kvprof::test {

// The text of tests/fixtures/hf/<name>.
inline std::string read_hf_fixture(const std::string& name) {
  std::ifstream in(std::string(KVPROF_FIXTURES_DIR) + "/hf/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The ModelSpec of a fixture (an empty one, with a test failure, when it does not parse).
inline model::ModelSpec load_hf_fixture(const std::string& name) {
  auto spec = model::parse_hf_config_text(read_hf_fixture(name), name);
  EXPECT_TRUE(spec.has_value()) << name << ": " << (spec ? "" : spec.error().message);
  return spec ? *spec : model::ModelSpec{};
}

// True when one of the spec's warnings contains `text`.
// The fixture `name` as JSON.
inline nlohmann::json hf_fixture_json(const std::string& name) {
  return nlohmann::json::parse(read_hf_fixture(name));
}

inline bool has_warning(const model::ModelSpec& m, std::string_view text) {
  for (const auto& w : m.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

// Expects an input error whose message contains `needle`.
inline void expect_input_error(const nlohmann::json& config, std::string_view needle) {
  auto spec = model::parse_hf_config(config, "test");
  ASSERT_FALSE(spec.has_value()) << "expected an error mentioning " << needle;
  EXPECT_EQ(spec.error().kind, ErrorKind::input);
  EXPECT_NE(spec.error().message.find(needle), std::string::npos) << spec.error().message;
}

}  // namespace kvprof::test
