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

// The folder of a path under src/kvprof/: "report/html" for the two report folders,
// "engines/vllm" for each engine's own folder, "engines/engine" for the engine's identity (the
// one file of engines/ that lower layers include) and "engines" for the registry above them.
std::string folder_of(const fs::path& relative) {
  auto it = relative.begin();
  std::string top = it->string();
  const auto depth = std::distance(relative.begin(), relative.end());
  if ((top == "report" || top == "engines") && depth > 2) {
    top += "/" + std::next(it)->string();
  } else if (top == "engines" && depth == 2 && std::next(it)->stem() == "engine") {
    top = "engines/engine";
  }
  return top;
}

// "engines/<name>": one of the engines' own folders, which never include each other.
bool is_engine_folder(const std::string& folder) {
  return folder.starts_with("engines/") && folder != "engines/engine";
}

TEST(ArchitectureLayers, EveryIncludeGoesDownOrStaysInItsFolder) {
  const std::map<std::string, int> layer = {{"util", 1},
                                            {"sys", 2},
                                            {"workload", 2},
                                            {"engines/engine", 2},
                                            {"client", 3},
                                            {"enginelog", 3},
                                            {"scheduler", 3},
                                            {"results", 4},
                                            {"model", 4},
                                            {"metrics", 4},
                                            {"llama", 4},
                                            {"gpu", 5},
                                            {"serve", 5},
                                            {"estimate", 6},
                                            {"engines/vllm", 7},
                                            {"engines/sglang", 7},
                                            {"engines/trtllm", 7},
                                            {"engines/llamacpp", 7},
                                            {"engines/hf", 7},
                                            {"engines/tgi", 7},
                                            {"engines/ollama", 8},
                                            {"engines", 9},
                                            {"sim", 10},
                                            {"report/text", 10},
                                            {"report/html", 10},
                                            {"analysis", 10},
                                            {"profile", 11},
                                            {"run", 12},
                                            {"bench", 12},
                                            {"experiment", 13},
                                            {"cli", 14}};
  const fs::path root = fs::path(KVPROF_SOURCE_DIR) / "src" / "kvprof";
  const std::regex include_re(R"re(#include "kvprof/([^"]+)")re");
  size_t n_includes = 0;
  size_t n_engine_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const auto ext = e.path().extension();
    if (!e.is_regular_file() || (ext != ".cpp" && ext != ".hpp")) continue;
    const std::string from = folder_of(fs::relative(e.path(), root));
    ASSERT_TRUE(layer.contains(from)) << "a folder the layers do not name: " << from;
    if (is_engine_folder(from)) ++n_engine_files;
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
  EXPECT_GT(n_includes, 500U);     // the walk read the tree
  EXPECT_GT(n_engine_files, 20U);  // and the engines' own folders
}

}  // namespace
