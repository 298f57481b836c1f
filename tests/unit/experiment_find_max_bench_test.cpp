// find-max on llama.cpp in-process (each step a bench run of the real libllama on a tiny GGUF
// made by `kvprof make-gguf`): the answer is the largest concurrency whose sequences fit the KV
// cells the engine reports, within floor(log2(range)) + 3 steps, from the planner's start or a
// far one; every step keeps its run folder; the steps above the cache say it ran out; more
// sequences than --parallel fail as queued; on the CPU the memory limit compares the engine's
// peak RSS with the machine's RAM; a bad model path, a missing library or a missing -c
// end with one line before any run folder is made.
#include "kvprof/experiment/find_max_bench.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_folders.hpp"
#include "support/run_kvprof.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

namespace kvprof::experiment {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint32_t k_input_len = 96;
constexpr uint32_t k_output_len = 32;

TEST(FindMaxBench, ASequenceHoldsItsPromptAndAllButItsLastToken) {
  EXPECT_EQ(sequence_kv_cells(96, 32), 127U);
  EXPECT_EQ(sequence_kv_cells(10, 1), 10U);
}

class FindMaxBenchE2E : public test::TempDirTest {
 protected:
  FindMaxBenchE2E() : TempDirTest("kvprof_find_max_bench") {}

  void SetUp() override {
    TempDirTest::SetUp();
    std::ofstream(m_dir / "config.json")
        << R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":128,
        "intermediate_size":256,"num_attention_heads":4,"num_key_value_heads":2,
        "num_hidden_layers":2,"vocab_size":1024,"max_position_embeddings":4096,
        "tie_word_embeddings":false,"torch_dtype":"bfloat16"})";
    const auto made = test::run_kvprof("make-gguf -m " + (m_dir / "config.json").string() + " -o " +
                                       gguf().string());
    ASSERT_EQ(made.rc, 0) << made.out;
  }

  [[nodiscard]] fs::path gguf() const { return m_dir / "tiny.gguf"; }
  [[nodiscard]] fs::path results() const { return m_dir / "results"; }

  // Runs find-max on the tiny model with `args` and returns its JSON.
  json find_max(const std::string& args, int expected_rc = 0) const {
    const auto r = test::run_kvprof(fmt_args(args) + " -q --json");
    EXPECT_EQ(r.rc, expected_rc) << r.out;
    json j = test::json_in(r.out);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }

  [[nodiscard]] std::string fmt_args(const std::string& args) const {
    return "find-max --model " + gguf().string() + " -t 1 --input-len " +
           std::to_string(k_input_len) + " --output-len " + std::to_string(k_output_len) +
           " --output-dir " + results().string() + " " + args;
  }
};

// The checks every search on the engine's KV cache must pass; returns the engine's capacity in
// sequences.
uint64_t expect_lands_on_the_engine_capacity(const json& j, uint32_t max_concurrency) {
  EXPECT_TRUE(j.at("in_process").get<bool>());
  const auto& steps = j.at("steps");
  EXPECT_FALSE(steps.empty());
  if (steps.empty()) return 0;
  // The engine's own capacity: the cells llama.cpp reported for the context, over the cells one
  // sequence holds.
  const auto& cells = steps[0].at("outcome").at("kv_capacity_tokens");
  EXPECT_TRUE(cells.is_number_unsigned()) << steps[0];
  if (!cells.is_number_unsigned()) return 0;
  const uint64_t capacity = cells.get<uint64_t>() / sequence_kv_cells(k_input_len, k_output_len);
  EXPECT_GE(capacity, 2U);
  EXPECT_EQ(j.at("max_concurrency"), capacity) << j.dump(1);
  EXPECT_EQ(j.at("first_failing_concurrency"), capacity + 1) << j.dump(1);
  const auto bound = static_cast<uint32_t>(std::floor(std::log2(max_concurrency))) + 3;
  EXPECT_EQ(j.at("step_bound"), bound);
  EXPECT_LE(j.at("n_steps").get<uint32_t>(), bound) << j.dump(1);
  EXPECT_EQ(j.at("n_steps"), steps.size());
  for (const auto& s : steps) {
    const uint64_t c = s.at("concurrency");
    EXPECT_EQ(s.at("pass").get<bool>(), c <= capacity) << s;
    EXPECT_EQ(s.at("outcome").at("kv_capacity_tokens"), cells) << s;
    // Every step ran the engine and kept its run folder.
    const fs::path dir = s.at("outcome").at("run_dir").get<std::string>();
    EXPECT_TRUE(fs::exists(dir / "summary.json")) << s;
    EXPECT_TRUE(fs::exists(dir / "engine.log")) << s;
    EXPECT_EQ(dir.parent_path(), fs::path(j.at("run_dir").get<std::string>()));
    if (c > capacity) {
      EXPECT_NE(s.at("why").get<std::string>().find("the KV cache ran out"), std::string::npos)
          << s;
    }
  }
  EXPECT_TRUE(fs::exists(fs::path(j.at("run_dir").get<std::string>()) / "find_max.json"));
  return capacity;
}

TEST_F(FindMaxBenchE2E, LandsWhereTheEngineKvCacheRunsOutFromThePlannersStart) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  const json j = find_max("-c 1024 --max-concurrency 64 --llama-lib " + lib_dir->string());
  ASSERT_TRUE(j.is_object());
  const uint64_t capacity = expect_lands_on_the_engine_capacity(j, 64);
  // The llama.cpp planner sizes the KV cache as the engine does: its start is the answer.
  EXPECT_EQ(j.at("start"), capacity);
  EXPECT_NE(j.at("start_source").get<std::string>().find("llama.cpp plan"), std::string::npos);
  EXPECT_LE(j.at("n_steps").get<uint32_t>(), 3U);
}

TEST_F(FindMaxBenchE2E, LandsOnTheReportedCellsFromAFarStart) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  // -c 1000: llama.cpp pads its cache to whole 256-cell blocks, so the capacity is what the
  // engine reports, not -c.
  const json j =
      find_max("-c 1000 --start 1 --max-concurrency 64 --llama-lib " + lib_dir->string());
  ASSERT_TRUE(j.is_object());
  expect_lands_on_the_engine_capacity(j, 64);
  EXPECT_EQ(j.at("steps")[0].at("outcome").at("kv_capacity_tokens"), 1024);
  EXPECT_GE(j.at("n_steps").get<uint32_t>(), 4U);  // bracketing and bisection both ran
}

TEST_F(FindMaxBenchE2E, MoreSequencesThanParallelSlotsAreQueued) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  const json j =
      find_max("-c 1024 --parallel 3 --max-concurrency 16 --llama-lib " + lib_dir->string());
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.at("max_concurrency"), 3) << j.dump(1);
  for (const auto& s : j.at("steps")) {
    if (s.at("concurrency").get<uint32_t>() > 3) {
      EXPECT_NE(s.at("why").get<std::string>().find("queued behind others"), std::string::npos)
          << s;
    }
  }
}

// MemTotal of this machine, bytes.
uint64_t mem_total_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (in >> key >> kib) {
    if (key == "MemTotal:") return kib * 1024;
    in.ignore(256, '\n');
  }
  return 0;
}

TEST_F(FindMaxBenchE2E, MemoryOnTheCpuIsTheEnginePeakRssOverTheMachineRam) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  // A limit no engine meets: every step fails on memory, and says by how much.
  const json j = find_max(
      "-c 1024 --max-concurrency 4 --max-memory-frac 0.000001 --gpu-source "
      "none --llama-lib " +
          lib_dir->string(),
      1);
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(j.at("max_concurrency").is_null()) << j.dump(1);
  ASSERT_FALSE(j.at("steps").empty());
  const uint64_t ram = mem_total_bytes();
  ASSERT_GT(ram, 0U);
  for (const auto& s : j.at("steps")) {
    EXPECT_FALSE(s.at("pass").get<bool>()) << s;
    EXPECT_NE(s.at("why").get<std::string>().find("memory"), std::string::npos) << s;
    std::ifstream in(fs::path(s.at("outcome").at("run_dir").get<std::string>()) / "summary.json");
    const json summary = json::parse(in, nullptr, false);
    ASSERT_TRUE(summary.is_object()) << s;
    const auto& condition = summary.at("conditions").at(0);
    const double rss = condition.at("peak_rss_bytes").get<double>();
    EXPECT_NEAR(s.at("outcome").at("memory_frac").get<double>(), rss / static_cast<double>(ram),
                1e-9)
        << s;
    EXPECT_DOUBLE_EQ(s.at("outcome").at("itl_p99_ms").get<double>(),
                     condition.at("itl_ms").at("p99").get<double>());
  }
}

TEST_F(FindMaxBenchE2E, BadInputEndsWithOneLineBeforeAnyRunFolder) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  const std::string lib = " --llama-lib " + lib_dir->string();
  const auto missing = test::run_kvprof("find-max --model " + (m_dir / "nope.gguf").string() +
                                        " -c 1024 --input-len 8 --output-len 4 --output-dir " +
                                        results().string() + lib);
  EXPECT_EQ(missing.rc, 2) << missing.out;
  EXPECT_NE(missing.out.find("no GGUF file at"), std::string::npos) << missing.out;
  EXPECT_EQ(std::count(missing.out.begin(), missing.out.end(), '\n'), 1) << missing.out;

  const auto no_lib =
      test::run_kvprof(fmt_args("-c 1024 --llama-lib " + (m_dir / "none").string()));
  EXPECT_NE(no_lib.rc, 0) << no_lib.out;
  EXPECT_NE(no_lib.out.find("no libllama found"), std::string::npos) << no_lib.out;

  const auto no_ctx = test::run_kvprof(fmt_args(lib));
  EXPECT_EQ(no_ctx.rc, 2) << no_ctx.out;
  EXPECT_NE(no_ctx.out.find("needs -c"), std::string::npos) << no_ctx.out;

  const auto both = test::run_kvprof(fmt_args("-c 1024 --endpoint http://127.0.0.1:1/v1" + lib));
  EXPECT_EQ(both.rc, 2) << both.out;
  EXPECT_NE(both.out.find("--endpoint or --launch"), std::string::npos) << both.out;
  EXPECT_TRUE(test::run_folders(results()).empty());
}

TEST_F(FindMaxBenchE2E, AFileTheEngineRefusesEndsTheSearchWithExit2) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  std::ofstream(m_dir / "tiny.gguf", std::ios::trunc) << "not a gguf file";
  const auto r = test::run_kvprof(fmt_args("-c 1024 -q --llama-lib " + lib_dir->string()));
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("llama.cpp refused the model or settings"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvprof::experiment
