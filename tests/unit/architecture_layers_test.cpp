// The layers of docs/architecture.md, held against the code: every #include of src/kvprof/ goes
// to its own folder or to a folder on a lower layer, so no folder cycle or arrow back up can
// creep in unnoticed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

namespace {

namespace fs = std::filesystem;

// The folder of a path under src/kvprof/ ("report/html" for the two report folders).
std::string folder_of(const fs::path& relative) {
  auto it = relative.begin();
  std::string top = it->string();
  if (top == "report" && std::distance(relative.begin(), relative.end()) > 2) {
    top += "/" + std::next(it)->string();
  }
  return top;
}

TEST(ArchitectureLayers, EveryIncludeGoesDownOrStaysInItsFolder) {
  const std::map<std::string, int> layer = {
      {"util", 1},        {"sys", 2},       {"workload", 2}, {"engines", 2}, {"client", 3},
      {"history", 3},     {"enginelog", 3}, {"model", 4},    {"metrics", 4}, {"llama", 4},
      {"gpu", 5},         {"serve", 5},     {"estimate", 6}, {"sim", 7},     {"report/text", 7},
      {"report/html", 7}, {"analysis", 7},  {"profile", 8},  {"bench", 9},   {"experiment", 10},
      {"cli", 11}};
  const fs::path root = fs::path(KVPROF_SOURCE_DIR) / "src" / "kvprof";
  const std::regex include_re(R"re(#include "kvprof/([^"]+)")re");
  size_t n_includes = 0;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
    const std::string from = folder_of(fs::relative(e.path(), root));
    ASSERT_TRUE(layer.contains(from)) << "a folder the layers do not name: " << from;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, include_re)) continue;
      ++n_includes;
      const std::string to = folder_of(fs::path(m[1].str()));
      ASSERT_TRUE(layer.contains(to)) << e.path() << " includes an unknown folder: " << line;
      if (to == from) continue;
      EXPECT_LT(layer.at(to), layer.at(from))
          << e.path() << " (layer " << layer.at(from) << ") includes " << to << " (layer "
          << layer.at(to) << "): " << line;
    }
  }
  EXPECT_GT(n_includes, 500U);  // the walk read the tree
}

}  // namespace
