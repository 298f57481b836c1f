// Test-only access to the data tests start from: files under tests/fixtures and models of the
// built-in catalog. Both record a test failure (not an exception) when the data is missing.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "kvprof/model/catalog.hpp"

namespace kvprof::test {

// The bytes of tests/fixtures/<path>; an empty string (and a failed expectation) when unreadable.
inline std::string read_fixture(const std::string& path) {
  std::ifstream in(std::string(KVPROF_FIXTURES_DIR) + "/" + path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The catalog model `id`; an empty spec (and a failed expectation) when the catalog lacks it.
inline model::ModelSpec catalog_spec(std::string_view id) {
  auto m = model::catalog_model(id);
  EXPECT_TRUE(m.has_value()) << id;
  return m ? std::move(*m) : model::ModelSpec{};
}

}  // namespace kvprof::test
