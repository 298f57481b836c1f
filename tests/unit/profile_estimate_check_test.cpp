// `kvprof profile` says what its comparison with an estimate is worth: the built-in simulated run
// is labelled simulated (text and summary.json) and, sized with a seeded engine jitter, shows a
// non-zero error that the same seed reproduces; --estimate-with against a real serve-sim process
// launched with other settings than the flags names the likely cause, and with no GPU found says
// which GPU it assumed.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvprof/sim/sim_jitter.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "support/serve_process.hpp"
#include "support/temp_dir.hpp"

namespace kvprof {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class ProfileEstimateCheck : public test::TempDirTest {
 protected:
  ProfileEstimateCheck() : TempDirTest("kvprof_estcheck") {}

  // `kvprof profile` on a small grid, plus `extra`; each condition long enough (~0.1 s) for the
  // memory sampler's 20 ms ticks to see it on a busy machine.
  sys::CommandResult profile(std::vector<std::string> extra, bool json_out = true) {
    std::vector<std::string> args = {
        KVPROF_BIN,        "profile", "--output-dir",      (m_dir / "results").string(),
        "--input-lens",    "128",     "--output-lens",     "32",
        "--concurrencies", "2",       "--n-per-condition", "2",
        "--prefix-modes",  "low",     "--warmup-requests", "1",
        "--baseline-s",    "0.5",     "--post-warmup-s",   "0.2",
        "--no-report",     "-q"};
    if (json_out) args.emplace_back("--json");
    args.insert(args.end(), extra.begin(), extra.end());
    sys::CommandOptions o;
    o.timeout = 120s;
    o.env = {{"KVPROF_NVML_LIBRARY", (m_dir / "absent.so").string()},
             {"KVPROF_URL", ""},
             {"KVPROF_MODEL", ""}};
    auto r = sys::run_command(args, o);
    EXPECT_TRUE(r.has_value());
    if (!r) return {};
    EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
    return *r;
  }

  static std::map<std::string, json> rows(const json& s) {
    std::map<std::string, json> out;
    for (const auto& row : s.at("estimate_comparison").at("rows"))
      out[row.at("component")] = row;
    return out;
  }

  static std::vector<std::string> causes(const json& s) {
    return s.at("estimate_comparison").at("likely_causes").get<std::vector<std::string>>();
  }
};

constexpr const char* k_nature = "simulated (checks the measurement pipeline, not the planner)";

TEST_F(ProfileEstimateCheck, DefaultRunIsLabelledSimulatedInTextAndJson) {
  const auto text = profile({"--sim-seed", "5"}, false);
  EXPECT_NE(text.stdout_text.find(std::string("breakdown of GPU 0, ") + k_nature),
            std::string::npos)
      << text.stdout_text;
  EXPECT_EQ(text.stdout_text.find("measured breakdown"), std::string::npos);
  EXPECT_EQ(text.stdout_text.find("overall confidence"), std::string::npos);
  EXPECT_NE(text.stdout_text.find("error (simulated)"), std::string::npos);
  EXPECT_NE(text.stdout_text.find("repeat with --sim-seed 5"), std::string::npos);
  EXPECT_NE(text.stdout_text.find("estimate assumed: GPU NVIDIA H100"), std::string::npos);

  const auto r = profile({"--sim-seed", "5"});
  const json s = json::parse(r.stdout_text);
  EXPECT_TRUE(s.at("simulated").get<bool>());
  EXPECT_EQ(s.at("memory_breakdown").at("nature"), k_nature);
  EXPECT_EQ(s.at("memory_breakdown").at("confidence_levels").at("overall"), k_nature);
  EXPECT_EQ(s.at("estimate_comparison").at("nature"), k_nature);
  EXPECT_EQ(s.at("simulation").at("jitter").at("seed"), 5);
  const json& a = s.at("estimate_comparison").at("assumptions");
  EXPECT_EQ(a.at("gpu").at("origin"), "simulated");
  EXPECT_EQ(a.at("engine_version_modelled"), "v0.19");
  // 128-token prompts two at a time never reach the plan's 8192-token profile run: said so.
  bool grid = false;
  for (const auto& line : causes(s)) {
    grid = grid || (line.starts_with("activations:") &&
                    line.find("largest step (about 256 tokens)") != std::string::npos);
  }
  EXPECT_TRUE(grid) << s.at("estimate_comparison").dump(1);
}

TEST_F(ProfileEstimateCheck, JitterGivesANonZeroErrorThatTheSeedReproducesWithinItsBounds) {
  const auto run = [&](const char* seed) {
    const auto r = profile({"--sim-seed", seed});
    return json::parse(r.stdout_text);
  };
  const json a = run("42");
  const json b = run("42");
  const json c = run("43");
  const auto blocks = [](const json& s) { return rows(s).at("num_gpu_blocks"); };
  // Not the plan exactly: the simulated engine's own non-torch and activation memory move blocks.
  const double err = blocks(a).at("error_pct");
  EXPECT_NE(err, 0.0);
  EXPECT_NE(rows(a).at("weights").at("error_pct").get<double>(), 0.0);
  // The same seed: the same server and the same comparison; another seed: another server.
  EXPECT_EQ(blocks(a).at("measured"), blocks(b).at("measured"));
  EXPECT_EQ(blocks(a).at("error_pct"), blocks(b).at("error_pct"));
  EXPECT_EQ(rows(a).at("weights").at("measured"), rows(b).at("weights").at("measured"));
  EXPECT_EQ(a.at("simulation").at("jitter"), b.at("simulation").at("jitter"));
  EXPECT_NE(blocks(a).at("measured"), blocks(c).at("measured"));

  // Within the stated bounds: the factors, and the block error they allow.
  for (const json* s : {&a, &c}) {
    const json& j = s->at("simulation").at("jitter");
    for (const char* f :
         {"non_torch_factor", "activation_factor", "cuda_graph_factor", "fragmentation_fraction"}) {
      const double v = j.at(f);
      EXPECT_GE(v, j.at("bounds").at(f)[0].get<double>()) << f;
      EXPECT_LE(v, j.at("bounds").at(f)[1].get<double>()) << f;
    }
    // The plan's non-torch is 0.25 GiB and its activation peak 1.9 GiB (Llama 3.1 8B, H100): the
    // engine takes at most 0.21 + 0.13 GiB more, or 0.01 + 0.13 GiB less, of a ~54 GiB KV cache.
    const double kv_gib = rows(*s).at("kv_cache").at("estimated").get<double>() / (1 << 30);
    const double most_fewer = (0.84 * 0.25 + 0.07 * 1.9) / kv_gib * 100;
    const double most_more = (0.04 * 0.25 + 0.07 * 1.9) / kv_gib * 100;
    const double e = blocks(*s).at("error_pct");  // (plan - server) / server
    EXPECT_LE(e, most_fewer * 1.01 + 0.01);
    EXPECT_GE(e, -most_more * 1.01 - 0.01);
  }
}

TEST_F(ProfileEstimateCheck, ADifferentGpuMemoryUtilizationIsNamed) {
  test::ServeProcess sim({"--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100", "--port", "0",
                          "--gpu-memory-utilization", "0.75"},
                         "serve-sim");
  ASSERT_GT(sim.port(), 0) << sim.first_line();
  const json s = json::parse(
      profile({"--endpoint", sim.url(), "--gpu-source", "none", "--estimate-with", "--gpu H100"})
          .stdout_text);
  const auto cs = causes(s);
  ASSERT_FALSE(cs.empty());
  bool named = false;
  for (const auto& line : cs) {
    if (line.starts_with("num_gpu_blocks:")) {
      named = line.find("gpu-memory-utilization") != std::string::npos &&
              line.find("about 0.75") != std::string::npos;
      EXPECT_EQ(line.find("do not describe this server"), std::string::npos) << line;
    }
    EXPECT_EQ(line.find("max-model-len"), std::string::npos) << line;
  }
  EXPECT_TRUE(named) << s.at("estimate_comparison").dump(1);
  const json& a = s.at("estimate_comparison").at("assumptions");
  EXPECT_EQ(a.at("gpu").at("origin"), "given");
  EXPECT_EQ(a.at("settings").at("gpu_memory_utilization").at("origin"), "default");
  EXPECT_EQ(a.at("settings").at("max_model_len").at("origin"), "default");
}

TEST_F(ProfileEstimateCheck, ADifferentMaxModelLenIsNamed) {
  test::ServeProcess sim({"--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100", "--port", "0",
                          "--max-model-len", "4096"},
                         "serve-sim");
  ASSERT_GT(sim.port(), 0) << sim.first_line();
  const json s = json::parse(
      profile({"--endpoint", sim.url(), "--gpu-source", "none", "--estimate-with", "--gpu H100"})
          .stdout_text);
  EXPECT_EQ(rows(s).at("max_model_len").at("measured"), 4096.0);
  bool named = false;
  for (const auto& line : causes(s)) {
    if (line.starts_with("max_model_len:")) {
      named = line.find("a different max-model-len") != std::string::npos &&
              line.find("--max-model-len 4096") != std::string::npos;
    }
    EXPECT_EQ(line.find("gpu-memory-utilization"), std::string::npos) << line;
  }
  EXPECT_TRUE(named) << s.at("estimate_comparison").dump(1);
}

TEST_F(ProfileEstimateCheck, ABlockCountOffByMoreThanTwiceSaysTheFlagsDoNotFit) {
  test::ServeProcess sim({"--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "H100", "--port", "0",
                          "--gpu-memory-utilization", "0.45", "--max-model-len", "8192"},
                         "serve-sim");
  ASSERT_GT(sim.port(), 0) << sim.first_line();
  const auto r = profile({"--endpoint", sim.url(), "--gpu-source", "none", "--estimate-with",
                          "--gpu H100 --max-model-len 8192"},
                         false);
  EXPECT_NE(r.stdout_text.find("estimate check: num_gpu_blocks: "), std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("the flags probably do not describe this server"), std::string::npos)
      << r.stdout_text;
}

TEST_F(ProfileEstimateCheck, WithNoGpuTheAssumedGpuIsPrintedAndRecorded) {
  test::ServeProcess sim({"--model", "Qwen/Qwen2.5-7B-Instruct", "--gpu", "L40S", "--port", "0"},
                         "serve-sim");
  ASSERT_GT(sim.port(), 0) << sim.first_line();
  std::vector<std::string> args = {"--endpoint", sim.url(),         "--gpu-source",
                                   "none",       "--estimate-with", "-tp 1"};
  const auto text = profile(args, false);
  EXPECT_NE(text.stdout_text.find("estimate assumed: GPU NVIDIA H100"), std::string::npos)
      << text.stdout_text;
  EXPECT_NE(text.stdout_text.find("assumed: no GPU found"), std::string::npos);
  EXPECT_NE(text.stdout_text.find("tensor_parallel_size 1"), std::string::npos);
  EXPECT_EQ(text.stdout_text.find("tensor_parallel_size 1 (default)"), std::string::npos);
  EXPECT_NE(text.stdout_text.find("gpu_memory_utilization 0.9 (default)"), std::string::npos);

  const json s = json::parse(profile(args).stdout_text);
  const json& a = s.at("estimate_comparison").at("assumptions");
  EXPECT_EQ(a.at("gpu").at("origin"), "assumed");
  EXPECT_EQ(a.at("gpu").at("note"), "no GPU found");
  EXPECT_EQ(a.at("engine"), "vllm");
  EXPECT_EQ(a.at("settings").at("tensor_parallel_size").at("origin"), "given");
  EXPECT_EQ(a.at("settings").at("kv_cache_dtype").at("origin"), "default");
  EXPECT_EQ(a.at("settings").at("dtype").at("value"), "bf16");
  // The server (an L40S) has far fewer blocks than an H100 plan: said, with the flags' doubt.
  bool doubt = false;
  for (const auto& line : causes(s))
    doubt = doubt || (line.starts_with("num_gpu_blocks:") &&
                      line.find("do not describe this server") != std::string::npos);
  EXPECT_TRUE(doubt) << s.at("estimate_comparison").dump(1);
}

}  // namespace
}  // namespace kvprof
