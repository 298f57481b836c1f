// llama.cpp across its releases, on real prebuilt builds (npm's @node-llama-cpp/linux-x64 at
// 3.1.1, 3.10.0, 3.16.2 and 3.21.1, fetched by scripts/fetch_llama_releases.sh, and the 3.22.1 of
// the install step): `kvprof bench` refuses the releases its loader does not speak with one line
// naming the release, before it makes a run folder, and on the ones it drives the plan of its
// own settings is llama.cpp's own report: model, KV and compute buffers to the byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "kvprof/llama/library.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "support/serve_process.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// The folder of npm release `version`; fails (or skips outside the suite) when it was not fetched.
#define KVPROF_RELEASE_OR_SKIP(dir_var, version)                                             \
  const fs::path dir_var = fs::path(KVPROF_SOURCE_DIR) / ".deps/llama/releases" / (version); \
  if (!fs::exists(dir_var / ".complete")) {                                                  \
    if (::kvprof::test::llama_required())                                                    \
      FAIL() << (version) << " missing: run scripts/fetch_llama_releases.sh";                \
    GTEST_SKIP() << (version) << " not fetched (scripts/fetch_llama_releases.sh)";           \
  }

sys::CommandResult bench(const fs::path& lib, const fs::path& gguf, const fs::path& out) {
  sys::CommandOptions o;
  o.timeout = 300s;
  o.env = {{"KVPROF_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1"}, {"KVPROF_OUTPUT_DIR", ""}};
  auto r = sys::run_command(
      {KVPROF_BIN, "bench", "-m", gguf.string(), "--llama-lib", lib.string(), "--seqlens", "64,300",
       "--concurrency", "1,2", "-t", "1", "-q", "--no-report", "--output-dir", out.string()},
      o);
  EXPECT_TRUE(r.has_value());
  return r ? *r : sys::CommandResult{};
}

TEST(LlamaReleases, NamesAreOrderedAsLlamaCppTaggedThem) {
  EXPECT_EQ(llama::drivable_release("b3889"), false);
  EXPECT_EQ(llama::drivable_release("ggml-org/llama.cpp b8121"), false);
  EXPECT_EQ(llama::drivable_release("v0.3.9"), false);
  EXPECT_EQ(llama::drivable_release("v0.4.0"), true);
  EXPECT_EQ(llama::drivable_release("ggml-org/llama.cpp v0.5.0"), true);
  EXPECT_EQ(llama::drivable_release("v1.0.0"), true);
  EXPECT_EQ(llama::drivable_release("master"), std::nullopt);
  EXPECT_EQ(llama::drivable_release(""), std::nullopt);
}

class OlderRelease : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(OlderRelease, IsRefusedWithOneLineBeforeAnythingIsWritten) {
  const auto [version, release] = GetParam();
  KVPROF_RELEASE_OR_SKIP(lib, version);
  test::ScopedTempDir tmp("kvprof_release");
  ASSERT_TRUE(test::write_dummy_llama(tmp.path / "tiny.gguf", 32000));
  const auto r = bench(lib, tmp.path / "tiny.gguf", tmp.path / "results");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(std::string("is llama.cpp ") + release), std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(std::string("@node-llama-cpp/linux-x64@") + version),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("older than kvprof drives"), std::string::npos);
  EXPECT_FALSE(fs::exists(tmp.path / "results"));
}

INSTANTIATE_TEST_SUITE_P(Npm, OlderRelease,
                         ::testing::Values(std::pair{"3.1.1", "b3889"},
                                           std::pair{"3.10.0", "b5640"},
                                           std::pair{"3.16.2", "b8121"}),
                         [](const auto& param_info) {
                           return std::string(param_info.param.second);
                         });

// A bench run of the tiny model (made once in `dir`) on `lib`, into its own results folder
// `dir`/`name`; its run folder.
fs::path bench_run(const fs::path& lib, const fs::path& dir, const std::string& name) {
  if (!fs::exists(dir / "tiny.gguf")) {
    EXPECT_TRUE(test::write_dummy_llama(dir / "tiny.gguf", 32000));
  }
  const auto r = bench(lib, dir / "tiny.gguf", dir / name);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir / name, ec)) {
    if (fs::exists(e.path() / "summary.json")) return e.path();
  }
  return {};
}

// The plan of bench's own settings against what each release's libllama reports it allocated.
void expect_plan_is_the_engines_report(const fs::path& lib) {
  test::ScopedTempDir tmp("kvprof_release");
  const fs::path run = bench_run(lib, tmp.path, "results");
  ASSERT_FALSE(run.empty());
  std::ifstream in(run / "summary.json");
  const auto s = nlohmann::json::parse(in);
  uint64_t model_bytes = 0;
  for (const auto& b : s.at("engine_reported"))
    model_bytes += b.at("model_bytes").get<uint64_t>();
  ASSERT_EQ(s.at("conditions").size(), 4U);
  for (const auto& c : s.at("conditions")) {
    const auto& plan = c.at("estimate");
    const std::string id = c.at("condition_id").get<std::string>();
    EXPECT_EQ(plan.at("weights_bytes").get<uint64_t>(), model_bytes) << id;
    EXPECT_EQ(plan.at("kv_cache_bytes").get<uint64_t>(), c.at("kv_cache_bytes").get<uint64_t>())
        << id;
    EXPECT_EQ(plan.at("compute_bytes").get<uint64_t>(),
              c.at("compute_buffer_bytes").get<uint64_t>())
        << id;
  }
}

TEST(LlamaReleases, V040IsDrivenAndPlannedToTheByte) {
  KVPROF_RELEASE_OR_SKIP(lib, "3.21.1");
  expect_plan_is_the_engines_report(lib);
}

TEST(LlamaReleases, TheInstalledV050IsDrivenAndPlannedToTheByte) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib);
  expect_plan_is_the_engines_report(*lib);
}

// compare and validate say which release each run drove: two runs of the same settings on v0.4.0
// and v0.5.0 differ in exactly that.
TEST(LlamaReleases, CompareAndValidateShowEachRunsRelease) {
  KVPROF_RELEASE_OR_SKIP(old_lib, "3.21.1");
  KVPROF_REQUIRE_LLAMA_OR_SKIP(new_lib);
  test::ScopedTempDir tmp("kvprof_release");
  const fs::path a = bench_run(old_lib, tmp.path, "v040");
  const fs::path b = bench_run(*new_lib, tmp.path, "v050");
  ASSERT_FALSE(a.empty() || b.empty());
  sys::CommandOptions o;
  o.timeout = 60s;
  auto r = sys::run_command({KVPROF_BIN, "compare", a.string(), b.string(), "--json"}, o);
  ASSERT_TRUE(r && r->exit_code == 0) << (r ? r->stderr_text : "");
  const auto j = nlohmann::json::parse(r->stdout_text);
  EXPECT_NE(j.at("runs").at(0).at("engine_version").get<std::string>().find("v0.4.0"),
            std::string::npos);
  EXPECT_NE(j.at("runs").at(1).at("engine_version").get<std::string>().find("v0.5.0"),
            std::string::npos);
  std::vector<std::string> differ;
  for (const auto& d : j.at("settings_that_differ"))
    differ.push_back(d.at("name").get<std::string>());
  EXPECT_NE(std::find(differ.begin(), differ.end(), "engine version"), differ.end())
      << j.at("settings_that_differ").dump();
  r = sys::run_command({KVPROF_BIN, "validate", a.string()}, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_NE(r->stdout_text.find("llamacpp 0.4.0-dev, ggml-org/llama.cpp v0.4.0"), std::string::npos)
      << r->stdout_text << r->stderr_text;
}

}  // namespace
}  // namespace kvprof
