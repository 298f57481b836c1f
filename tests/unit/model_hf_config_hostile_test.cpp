// A model's config.json is user input: a number beyond a double's range, a wrong type in any
// field kvprof reads, or invalid UTF-8 must be an input error naming the file, never an
// exception ("internal error").
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/model/hf_config.hpp"
#include "support/run_kvprof.hpp"

namespace kvprof::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every key path of `doc` down to `depth` levels (objects only), e.g. /rope_scaling/factor.
void key_paths(const json& doc, const json::json_pointer& at, int depth,
               std::vector<json::json_pointer>& out) {
  if (!doc.is_object() || depth == 0) return;
  for (const auto& [key, value] : doc.items()) {
    const auto path = at / key;
    out.push_back(path);
    key_paths(value, path, depth - 1, out);
  }
}

TEST(HfConfigHostile, NumberBeyondADoubleIsAnInputErrorNamingTheFile) {
  auto spec = parse_hf_config_text(
      R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","rope_theta":5e400})",
      "/models/x/config.json");
  ASSERT_FALSE(spec);
  EXPECT_EQ(spec.error().kind, ErrorKind::input);
  EXPECT_NE(spec.error().message.find("/models/x/config.json"), std::string::npos);
  EXPECT_NE(spec.error().message.find("5e400"), std::string::npos) << spec.error().message;
}

TEST(HfConfigHostile, InvalidUtf8IsAnInputError) {
  auto spec = parse_hf_config_text("{\"architectures\":[\"Llama\xff\"],\"model_type\":\"llama\"}",
                                   "cfg.json");
  ASSERT_FALSE(spec);
  EXPECT_EQ(spec.error().kind, ErrorKind::input);
  EXPECT_NE(spec.error().message.find("cfg.json"), std::string::npos);
}

TEST(HfConfigHostile, AWrongTypeInAnyFieldIsAnInputErrorOrIgnored) {
  const std::vector<json> wrong = {"text", json::object(), json::array(),        nullptr, true,
                                   -1,     1e300,          json::array({1, "a"})};
  size_t cases = 0;
  size_t rejected = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(KVPROF_FIXTURES_DIR) / "hf")) {
    const json doc = json::parse(read_file(entry.path()));
    std::vector<json::json_pointer> paths;
    key_paths(doc, json::json_pointer(), 3, paths);
    for (const auto& path : paths) {
      for (const auto& value : wrong) {
        json bad = doc;
        bad[path] = value;
        const std::string source = entry.path().filename().string();
        Expected<ModelSpec> spec = fail(ErrorKind::internal, "not run");
        ASSERT_NO_THROW(spec = parse_hf_config_text(bad.dump(), source))
            << source << " " << path.to_string() << " = " << value.dump();
        ++cases;
        if (!spec) {
          ++rejected;
          EXPECT_EQ(spec.error().kind, ErrorKind::input)
              << source << " " << path.to_string() << ": " << spec.error().message;
          EXPECT_NE(spec.error().message.find(source), std::string::npos) << spec.error().message;
        }
      }
    }
  }
  EXPECT_GT(cases, 1000U);
  EXPECT_GT(rejected, 100U);  // the fields kvprof needs are checked, not silently defaulted
}

TEST(HfConfigHostile, EstimateExitsTwoNamingTheFile) {
  const fs::path dir = fs::temp_directory_path() / ("kvprof_hostile_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json")
      << R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":4096,
            "num_attention_heads":32,"num_hidden_layers":32,"vocab_size":128256,
            "intermediate_size":14336,"rope_theta":5e400})";
  const auto r = test::run_kvprof("estimate -m " + (dir / "config.json").string());
  fs::remove_all(dir);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("config.json"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("internal error"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvprof::model
