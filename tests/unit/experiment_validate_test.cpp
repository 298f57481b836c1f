// validate: each component's error against the sampled figure (the engine's where nothing was
// sampled), the expected-accuracy band per component, the diagnosis of the gap that is largest
// for its band; and `kvprof validate` end to end on a simulated profile run, against another
// calculator's figures given by hand, against kvprof's own estimate, and without either.
#include "kvprof/experiment/validate.hpp"
#include "kvprof/util/units.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/run_folders.hpp"
#include "support/run_kvprof.hpp"

namespace kvprof::experiment {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

results::RunSummary run_with(double weights_gib, double kv_gib, double act_gib,
                             double overhead_gib) {
  results::RunSummary r;
  r.id = "r1";
  r.kind = "profile";
  r.memory = "GPU";
  const auto gib = [](double g) { return static_cast<uint64_t>(g * k_gib); };
  r.measured["weights"] = {gib(weights_gib), "high", ""};
  r.measured["kv_cache"] = {gib(kv_gib), "high", ""};
  r.measured["activations"] = {gib(act_gib), "medium", ""};
  r.measured["total"] = {gib(weights_gib + kv_gib + act_gib + overhead_gib), "high", ""};
  r.reported = {{"weights", gib(weights_gib)},
                {"non_torch", gib(overhead_gib / 2)},
                {"cuda_graph", gib(overhead_gib / 2)}};
  return r;
}

TEST(Validate, ErrorsBandsAndTheLargestGapForItsBand) {
  const results::RunSummary r = run_with(13.0, 40.0, 1.0, 1.0);
  // Weights 3% off (outside +-2%); activations 20% off (inside +-30%): weights is the gap.
  std::map<std::string, double> ref = {{"weights", 13.39 * k_gib},
                                       {"kv_cache", 40.0 * k_gib},
                                       {"activations", 0.8 * k_gib},
                                       {"overhead", 1.3 * k_gib}};
  const auto v = validate_run(r, ref, "calculator figures");
  ASSERT_EQ(v.rows.size(), 5U);
  EXPECT_EQ(v.rows[0].component, "weights");
  EXPECT_NEAR(*v.rows[0].error_pct, 3.0, 0.01);
  EXPECT_FALSE(*v.rows[0].within_band);
  EXPECT_EQ(v.rows[0].band.pct, 2);
  EXPECT_NEAR(*v.rows[2].error_pct, -20.0, 0.01);
  EXPECT_TRUE(*v.rows[2].within_band);
  // Overhead was not sampled: the engine's non-torch + graphs is the measurement.
  EXPECT_EQ(v.rows[3].error_against, "reported by engine");
  EXPECT_NEAR(*v.rows[3].error_pct, 30.0, 0.01);
  EXPECT_FALSE(v.rows[4].reference_bytes);  // no total given
  EXPECT_EQ(v.largest_gap, "weights");
  EXPECT_NE(v.diagnosis.find("largest gap: weights"), std::string::npos) << v.diagnosis;
  EXPECT_NE(v.diagnosis.find("outside the ±2% expected"), std::string::npos) << v.diagnosis;

  // With weights exact, the activations' 20% is the largest for its band of 30%... unless the
  // KV cache is off by more than half its band.
  ref["weights"] = 13.0 * k_gib;
  ref["kv_cache"] = 50.0 * k_gib;  // +25% of a +-15% band
  const auto v2 = validate_run(r, ref, "x");
  EXPECT_EQ(v2.largest_gap, "kv_cache");
  EXPECT_NE(v2.diagnosis.find("KV pool is smaller than assumed"), std::string::npos)
      << v2.diagnosis;
  const json j = validation_json(v2);
  EXPECT_EQ(j.at("components")[1].at("expected_band_pct"), 15);
  EXPECT_EQ(j.at("components")[1].at("within_band"), false);
  EXPECT_NE(validation_text(v2).find("OUTSIDE"), std::string::npos);

  const auto none = validate_run(results::RunSummary{}, {}, "x");
  EXPECT_TRUE(none.largest_gap.empty());
  EXPECT_NE(none.diagnosis.find("no component"), std::string::npos);
}

TEST(Validate, CommandAgainstACalculatorAndTheEstimate) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("kvprof_validate_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  // The built-in simulator sized exactly by the planner (no engine jitter), so the run records
  // the plan it was sized by.
  auto r = test::run_kvprof(
      "profile --output-dir " + dir.string() +
      " --input-lens 64 --output-lens 8 --concurrencies 2 --prefix-modes low --baseline-s 0.2 "
      "--post-warmup-s 0.1 -q --sim-no-jitter --model meta-llama/Llama-3.1-8B-Instruct "
      "--run-tag v");
  ASSERT_EQ(r.rc, 0) << r.out;
  std::string run_id;
  run_id = test::first_run_folder(dir).filename().string();

  // The recorded estimate: the simulator holds exactly the plan's weights and KV pool. Its
  // activations are only the simulated step's, far under the plan's profile-run peak, so the
  // check's answer is no (exit 4) and says which component, after the JSON.
  r = test::run_kvprof("validate " + run_id + " --results-dir " + dir.string() + " --json");
  json j = test::json_in(r.out);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_NE(j.at("reference").get<std::string>().find("recorded"), std::string::npos);
  std::string outside;
  for (const auto& c : j.at("components")) {
    if (c.at("component") == "kv_cache" || c.at("component") == "weights") {
      EXPECT_NEAR(c.at("error_pct").get<double>(), 0.0, 0.01) << c;
      EXPECT_TRUE(c.at("within_band").get<bool>());
    }
    if (c.at("within_band").is_boolean() && !c.at("within_band").get<bool>()) {
      outside += (outside.empty() ? "" : ", ") + c.at("component").get<std::string>();
    }
  }
  EXPECT_EQ(r.rc, outside.empty() ? 0 : 4) << r.out;
  if (!outside.empty()) {
    EXPECT_NE(r.out.find("kvprof: error: outside the expected accuracy: " +
                         outside.substr(0, outside.find(','))),
              std::string::npos)
        << r.out;
  }

  // Another calculator's figures, by hand: far from the measurement, so the check fails (exit 4)
  // after the table.
  r = test::run_kvprof("validate " + (dir / run_id).string() +
                       " --calc-weights 13.5 --calc-kv 0.4 --calc-activations 0.9 "
                       "--calc-overhead 0.6");
  ASSERT_EQ(r.rc, 4) << r.out;
  EXPECT_NE(r.out.find("kvprof: error: outside the expected accuracy: "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("against calculator figures"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("largest gap: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("±15%"), std::string::npos);

  // kvprof's estimate for other settings: a smaller memory fraction leaves a smaller KV pool.
  r = test::run_kvprof("validate " + (dir / run_id).string() +
                       " --json --estimate-with \"--gpu H100 --gpu-memory-utilization 0.5\"");
  ASSERT_EQ(r.rc, 4) << r.out;  // the KV cache lies outside its band
  j = test::json_in(r.out);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  for (const auto& c : j.at("components")) {
    if (c.at("component") == "kv_cache") {
      EXPECT_LT(c.at("error_pct").get<double>(), -15) << c;
    }
  }
  EXPECT_EQ(test::run_kvprof("validate " + (dir / run_id).string() +
                             " --calc-kv 1 --estimate-with \"--gpu H100\"")
                .rc,
            2);
  EXPECT_EQ(test::run_kvprof("validate " + (dir / "nope").string()).rc, 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvprof::experiment
