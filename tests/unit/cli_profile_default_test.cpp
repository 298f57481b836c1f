// `kvprof profile` with no --endpoint or --launch: the built-in default is a real llama.cpp server
// (kvprof serve over the real libllama) on a dummy-weight Qwen2.5-0.5B made once under the
// results folder, planned from its own command and compared with the buffers it logs; without
// libllama it says so and runs the simulator; --sim asks for the simulator.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_folders.hpp"
#include "support/run_kvprof.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

namespace kvprof {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A short grid and short phases, so the real engine's run takes a few seconds.
const std::string k_quick =
    " --input-lens 32 --output-lens 4 --concurrencies 1 --baseline-s 0.2 --post-warmup-s 0.2 "
    "--warmup-requests 1 --min-condition-s 0.2 --no-report";

TEST(ProfileDefault, ARealLlamaCppServerOnADummyModelAgainstThePlan) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  test::ScopedTempDir tmp("kvprof_profile_default");
  const fs::path out = tmp.path / "results";
  const std::string env =
      "KVPROF_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 KVPROF_LLAMA_LIB=" + lib_dir->string();
  const auto r = test::run_kvprof_env(env, "profile --output-dir " + out.string() + k_quick);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("profiling a real llama.cpp server"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("made now"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("SIMULATED"), std::string::npos) << r.out;
  const fs::path gguf = out / ".models" / "qwen2.5-0.5b-instruct-dummy-q8_0.gguf";
  ASSERT_TRUE(fs::exists(gguf));
  EXPECT_GT(fs::file_size(gguf), 400ULL << 20);  // 0.5B parameters in Q8_0
  const fs::path run = test::first_run_folder(out);
  std::ifstream in(run / "summary.json");
  const json summary = json::parse(in, nullptr, false);
  ASSERT_FALSE(summary.is_discarded());
  EXPECT_FALSE(summary["simulated"].get<bool>());
  EXPECT_EQ(summary["model_info"]["name"], "Qwen/Qwen2.5-0.5B-Instruct");
  // llama.cpp's buffers are the plan's, to the digit it prints them with.
  size_t stated = 0;
  for (const auto& row : summary["estimate_comparison"]["rows"]) {
    if (row["measured_source"] != "server.log") continue;
    ++stated;
    EXPECT_EQ(row["error_pct"].get<double>(), 0.0) << row.dump();
  }
  EXPECT_EQ(stated, 3U) << summary["estimate_comparison"].dump(1);
  // The server's peak RSS broken into the buffers llama.cpp states, reserved; overhead the
  // residual (below zero where reserved pages were never touched): the parts add up.
  const json& b = summary["memory_breakdown"];
  ASSERT_TRUE(b.is_object()) << summary.dump(1).substr(0, 2000);
  EXPECT_EQ(b["memory"], "host");
  EXPECT_TRUE(b["gpu"].is_null());
  EXPECT_EQ(b["total_measured_bytes"], summary["host_memory"]["peak_rss_bytes"]);
  const json& reported = summary["engine_reported"]["components"];
  EXPECT_EQ(b["components"]["weights"]["bytes"], reported["weights"]["bytes"]);
  EXPECT_EQ(b["components"]["kv_cache"]["bytes"], reported["kv_cache"]["bytes"]);
  EXPECT_EQ(b["components"]["activations"]["bytes"], reported["compute"]["bytes"]);
  int64_t parts = 0;
  for (const char* part : {"weights", "kv_cache", "activations", "overhead"})
    parts += b["components"][part]["bytes"].get<int64_t>();
  EXPECT_EQ(parts, b["total_measured_bytes"].get<int64_t>());
  // The server's RSS at the three capture points, in order, within its peak.
  const json& phases = summary["host_memory"]["phases"];
  int64_t last_t = 0;
  for (const char* name : {"baseline", "post_warmup", "peak"}) {
    ASSERT_TRUE(phases.contains(name)) << phases.dump(1);
    EXPECT_GT(phases[name]["t_mono_ns"].get<int64_t>(), last_t) << name;
    last_t = phases[name]["t_mono_ns"].get<int64_t>();
    EXPECT_GT(phases[name]["rss_bytes"].get<uint64_t>(), 200ULL << 20) << name;  // loaded
    EXPECT_LE(phases[name]["rss_bytes"], summary["host_memory"]["peak_rss_bytes"]) << name;
  }
  // The comparison holds the plan to the same meaning: activations are the compute buffers it
  // plans, overhead the residual on each side, so measured and estimated each add up.
  std::map<std::string, json> rows;
  for (const auto& row : summary["estimate_comparison"]["rows"])
    rows[row["component"].get<std::string>()] = row;
  EXPECT_EQ(rows["overhead"]["measured_source"], "residual");
  for (const char* side : {"measured", "estimated"}) {
    double sum = 0;
    for (const char* part : {"weights", "kv_cache", "activations", "overhead"})
      sum += rows[part][side].get<double>();
    EXPECT_NEAR(sum, rows["total"][side].get<double>(), 1.0) << side;
  }
  EXPECT_NE(r.out.find("measured breakdown of the server's peak RSS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("total (peak RSS)"), std::string::npos) << r.out;
  // validate holds the run against the plan it recorded: llama.cpp's buffers are the plan's.
  const auto v = test::run_kvprof("validate " + run.string());
  EXPECT_EQ(v.rc, 0) << v.out;
  // The run's engine and the release its server reported.
  EXPECT_NE(v.out.find("(profile run, host RSS memory, llamacpp "), std::string::npos) << v.out;
  // The buffers are the engine's and the plan's to the digit; the total is the server's peak RSS,
  // sampled, within the band the plan is held to.
  EXPECT_NE(v.out.find("largest gap: total"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("within the"), std::string::npos) << v.out;

  // Run again, against the plan of flags given: the model is made once, and --estimate-with
  // plans the model the default engine serves.
  const auto again =
      test::run_kvprof_env(env, "profile --output-dir " + out.string() + k_quick +
                                    " --estimate-with '--engine llamacpp --gpu cpu -c 4096 -np 4'");
  ASSERT_EQ(again.rc, 0) << again.out;
  EXPECT_EQ(again.out.find("made now"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("compute buffers (server.log): stated "), std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("(+0.00%)"), std::string::npos) << again.out;
}

TEST(ProfileDefault, WithoutLibllamaItSaysSoAndSimulates) {
  test::ScopedTempDir tmp("kvprof_profile_default");
  const fs::path out = tmp.path / "results";
  const auto r = test::run_kvprof("profile --llama-lib " + (tmp.path / "nowhere").string() +
                                  " --output-dir " + out.string() + k_quick);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("kvprof: the default profiles a real llama.cpp server, but no libllama"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("running the SIMULATED vLLM server instead"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(out / ".models"));
}

TEST(ProfileDefault, SimAsksForTheSimulator) {
  test::ScopedTempDir tmp("kvprof_profile_default");
  const fs::path out = tmp.path / "results";
  const auto r = test::run_kvprof("profile --sim --output-dir " + out.string() + k_quick);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("SIMULATED"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("profiling a real llama.cpp server"), std::string::npos) << r.out;
  // A model too big to serve here as the default is refused with what to do instead.
  const auto big = test::run_kvprof(
      "profile --model meta-llama/Llama-3.1-70B-Instruct "
      "--output-dir " +
      out.string() + k_quick);
  if (test::llama_test_dir()) {
    EXPECT_EQ(big.rc, 2) << big.out;
    EXPECT_NE(big.out.find("too big to serve on this machine"), std::string::npos) << big.out;
  }
}

}  // namespace
}  // namespace kvprof
