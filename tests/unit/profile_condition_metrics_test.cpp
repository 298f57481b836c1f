// Tests for src/kvprof/profile/condition_metrics.cpp: the KV accounting from request records and
// the scrape plan; then the kvprof binary's `profile` against serve-sim (in this test process):
// scrapes at each condition's bounds, --min-condition-s, repeatable per-request KV peaks, the
// low-sample marks and warning, and progress lines that show each condition's own figures.
#include "kvprof/profile/condition_metrics.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kvprof/sim/sim_server.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "support/run_folders.hpp"
#include "support/sim_server_test.hpp"

namespace kvprof::profile {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;

// A finished request holding `prompt` tokens from `first_ms`, one token per ms up to `out`.
client::RequestRecord record(int64_t first_ms, uint32_t prompt, uint32_t out) {
  client::RequestRecord r;
  r.input_len = prompt;
  r.first_token_ns = first_ms * 1'000'000;
  for (uint32_t k = 0; k < out; ++k)
    r.chunks.push_back({(first_ms + k) * 1'000'000, 1});
  r.end_ns = (first_ms + out) * 1'000'000;
  return r;
}

TEST(KvAccounting, PeakIsTheMostTokensHeldAtOnce) {
  KvAccounting kv;
  kv.begin_condition();
  kv.add(record(0, 100, 10));  // holds 101..110 over [0, 10) ms
  kv.add(record(5, 50, 10));   // holds 51..60 over [5, 15) ms
  client::RequestRecord failed;
  failed.first_token_ns = client::k_no_time;  // no first token: held nothing
  kv.add(failed);
  EXPECT_EQ(kv.n_requests(0), 2u);
  // At 9 ms: 110 + 55 tokens; rounded to blocks of 16: 112 + 64.
  EXPECT_EQ(kv.peak_tokens(0, 0), 110u + 55u);
  EXPECT_EQ(kv.peak_tokens(0, 16), 112u + 64u);

  kv.begin_condition();
  kv.add(record(0, 100, 10));
  kv.add(record(10, 100, 10));  // starts as the first ends: never both at once
  EXPECT_EQ(kv.peak_tokens(1, 0), 110u);
  EXPECT_FALSE(kv.peak_tokens(2, 0).has_value());

  // Two requests whose first 64 prompt tokens are a shared prefix: held once with sharing.
  kv.begin_condition();
  kv.add(record(0, 100, 10), 64);  // 101..110 over [0, 10) ms
  kv.add(record(5, 100, 10), 64);  // 101..110 over [5, 15) ms; 105 at 9 ms
  EXPECT_EQ(kv.shared_prefix_tokens(2), 64u);
  EXPECT_EQ(kv.peak_tokens(2, 16), 112u + 112u);
  EXPECT_EQ(kv.peak_tokens(2, 16, true), 64u + 48u + 48u);  // own parts 46 and 41, in blocks
  EXPECT_EQ(kv.peak_tokens(2, 0, true), 64u + 46u + 41u);
}

TEST(ScrapePlan, AutoIntervalFollowsTheShortestCondition) {
  EXPECT_EQ(auto_scrape_interval_ms(1.0), 125u);
  EXPECT_EQ(auto_scrape_interval_ms(0.2), 25u);
  EXPECT_EQ(auto_scrape_interval_ms(0.01), k_scrape_floor_ms);
  EXPECT_EQ(auto_scrape_interval_ms(0), k_scrape_floor_ms);
  EXPECT_EQ(auto_scrape_interval_ms(600), k_scrape_ceiling_ms);
  EXPECT_TRUE(scrape_plan_for(0, 1.0).automatic);
  EXPECT_EQ(scrape_plan_for(500, 1.0).interval_ms, 500u);
}

class ConditionMetricsE2E : public test::SimServerTest {
 protected:
  ConditionMetricsE2E() : SimServerTest("kvprof_cond") {}

  // A small simulated vLLM: a lone 8-token request lasts ~20 ms, shorter than one old 100 ms
  // scrape interval.
  void start_sim() { start_server(small_vllm(2.0)); }

  // `kvprof profile` on the server with a tiny grid plus `extra`; its result.
  sys::CommandResult profile(const std::string& tag, std::vector<std::string> extra) const {
    std::vector<std::string> args = {KVPROF_BIN,          "profile",
                                     "--endpoint",        m_server->base_url(),
                                     "--output-dir",      results(tag).string(),
                                     "--baseline-s",      "0.1",
                                     "--post-warmup-s",   "0.1",
                                     "--warmup-requests", "1",
                                     "--output-lens",     "8",
                                     "--prefix-modes",    "low",
                                     "--no-report"};
    args.insert(args.end(), extra.begin(), extra.end());
    sys::CommandOptions o;
    o.timeout = 60s;
    o.env = {{"KVPROF_NVML_LIBRARY", std::string(KVPROF_FAKE_NVML_PATH)},
             {"KVPROF_FAKE_NVML_GPUS", "1"},
             {"KVPROF_FAKE_NVML_LIVE", (m_dir / "live.txt").string()},
             {"KVPROF_URL", ""},
             {"KVPROF_MODEL", ""}};
    auto r = sys::run_command(args, o);
    EXPECT_TRUE(r.has_value());
    return r.value_or(sys::CommandResult{});
  }

  fs::path results(const std::string& tag) const { return m_dir / ("results_" + tag); }

  json summary(const std::string& tag) const {
    std::ifstream in(test::first_run_folder(results(tag)) / "summary.json");
    return json::parse(in);
  }
};

TEST_F(ConditionMetricsE2E, ShortConditionsGetFiveScrapesAndProgressShowsTheirOwnKv) {
  start_sim();
  // Natural conditions of ~20 ms (c1) and ~25 ms (c8); the automatic interval (0.2 s / 8 = 25 ms)
  // and the scrapes at each condition's start and end give each one at least 5.
  const auto r = profile(
      "short", {"--input-lens", "256", "--concurrencies", "1,8", "--min-condition-s", "0.2"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const json s = summary("short");
  EXPECT_EQ(s.at("condition_sampling").at("metrics_interval_mode"), "auto");
  EXPECT_EQ(s.at("condition_sampling").at("metrics_interval_ms"), 25);
  const auto& conds = s.at("conditions");
  ASSERT_EQ(conds.size(), 2u);
  for (const auto& c : conds) {
    EXPECT_GE(c.at("n_scrapes").get<uint64_t>(), k_min_condition_samples) << c.at("condition_id");
    EXPECT_TRUE(c.at("low_sample_figures").empty()) << c.at("low_sample_figures");
    EXPECT_EQ(c.at("kv_usage").at("scraped").at("source"), "/metrics");
    EXPECT_EQ(c.at("kv_usage").at("per_request").at("block_size_tokens"), 16);
  }
  for (const auto& w : s.at("warnings"))
    EXPECT_EQ(w.get<std::string>().find("fewer than"), std::string::npos) << w;

  // Each progress line shows its own condition's scraped peak (c8 holds more than c1), with
  // the number of scrapes behind it.
  const std::regex line(R"(\[(\d)/2\] (\S+): .* KV peak ([0-9.]+)% over (\d+) scrapes)");
  int seen = 0;
  for (std::sregex_iterator it(r.stderr_text.begin(), r.stderr_text.end(), line), end; it != end;
       ++it) {
    const auto& c = conds.at(std::stoul((*it)[1]) - 1);
    EXPECT_EQ((*it)[2], c.at("condition_id").get<std::string>());
    EXPECT_EQ((*it)[3], fmt::format("{:.1f}", c.at("peak_kv_cache_usage").get<double>() * 100));
    EXPECT_EQ(std::stoull((*it)[4]), c.at("n_scrapes").get<uint64_t>());
    ++seen;
  }
  EXPECT_EQ(seen, 2) << r.stderr_text;
  EXPECT_LT(conds[0].at("peak_kv_cache_usage").get<double>(),
            conds[1].at("peak_kv_cache_usage").get<double>());
}

TEST_F(ConditionMetricsE2E, TheSameGridTwiceGivesTheSameKvPeaksWithinOneBlock) {
  // Steps of 10 ms: a request lasts ~100 ms, so the 4 of a batch overlap even when a loaded
  // machine (a sanitizer build beside fuzzers) sends the last one tens of ms after the first.
  start_server(small_vllm(10.0));
  std::vector<json> runs;
  for (const char* tag : {"a", "b"}) {
    const auto r = profile(
        tag, {"--input-lens", "256", "--concurrencies", "1,4", "--min-condition-s", "0.1", "-q"});
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    runs.push_back(summary(tag).at("conditions"));
  }
  const uint64_t per_request = (256 + 8 + 15) / 16 * 16;  // prompt + output, in whole blocks
  for (size_t i = 0; i < 2; ++i) {
    const auto& a = runs[0].at(i).at("kv_usage").at("per_request");
    const auto& b = runs[1].at(i).at("kv_usage").at("per_request");
    const uint64_t peak_a = a.at("peak_tokens"), peak_b = b.at("peak_tokens");
    EXPECT_LE(peak_a > peak_b ? peak_a - peak_b : peak_b - peak_a, 16u) << i;
    const uint64_t c = runs[0].at(i).at("concurrency");
    EXPECT_LE(peak_a, c * per_request);
    EXPECT_GT(peak_a, (c - 1) * per_request);
    EXPECT_EQ(a.at("capacity_tokens"), 2048 * 16);
    EXPECT_DOUBLE_EQ(a.at("peak_usage").get<double>(), static_cast<double>(peak_a) / (2048 * 16));
  }
}

TEST_F(ConditionMetricsE2E, MinConditionSecondsRepeatsRequestsUntilReached) {
  start_sim();
  const auto r = profile(
      "repeat", {"--input-lens", "128", "--concurrencies", "2", "--min-condition-s", "0.3", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const json s = summary("repeat");
  const auto& c = s.at("conditions").at(0);
  EXPECT_GE(c.at("duration_s").get<double>(), 0.3);
  const uint64_t repeated = c.at("n_repeated");
  EXPECT_GT(repeated, 2u);  // a pass of 2 requests lasts ~20 ms
  EXPECT_EQ(c.at("n_requests").get<uint64_t>(), 2 + repeated);
  EXPECT_EQ(c.at("n_ok"), c.at("n_requests"));
  // Every repeat is a row of request_trace.csv, marked by its repeat number.
  std::ifstream trace(test::first_run_folder(results("repeat")) / "request_trace.csv");
  std::string header, row;
  std::getline(trace, header);
  ASSERT_TRUE(header.ends_with(",repeat")) << header;
  uint64_t rows = 0, repeat_rows = 0;
  while (std::getline(trace, row)) {
    ++rows;
    if (row.substr(row.rfind(',') + 1) != "0") ++repeat_rows;
  }
  EXPECT_EQ(rows, 2 + repeated);
  EXPECT_EQ(repeat_rows, repeated);
}

TEST_F(ConditionMetricsE2E, TooFewSamplesAreMarkedAndWarned) {
  start_sim();
  // A fixed 1 s interval and 300 ms memory samples over conditions of ~20 ms: the end scrape only,
  // a sample or none.
  const auto r =
      profile("thin", {"--input-lens", "128", "--concurrencies", "1,2", "--min-condition-s", "0",
                       "--metrics-interval-ms", "1000", "--gpu-interval-ms", "300", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const json s = summary("thin");
  EXPECT_EQ(s.at("condition_sampling").at("metrics_interval_mode"), "fixed");
  for (const auto& c : s.at("conditions")) {
    EXPECT_LT(c.at("n_scrapes").get<uint64_t>(), k_min_condition_samples);
    // Its end (the scrape at its start is the state before it, outside its window).
    EXPECT_GE(c.at("n_scrapes").get<uint64_t>(), 1u);
    const auto& figures = c.at("low_sample_figures");
    EXPECT_NE(std::find(figures.begin(), figures.end(), "kv_cache_usage"), figures.end());
    EXPECT_NE(std::find(figures.begin(), figures.end(), "peak_used_bytes"), figures.end());
  }
  int warned = 0;
  for (const auto& w : s.at("warnings"))
    warned += w.get<std::string>().find("fewer than 5 samples") != std::string::npos;
  EXPECT_EQ(warned, 1) << s.at("warnings");
  // The table marks the figures and says why under it.
  EXPECT_TRUE(std::regex_search(r.stdout_text, std::regex(R"(in128_out8_c1_low .*%\*)")))
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("* from fewer than 5 samples"), std::string::npos);
}

}  // namespace
}  // namespace kvprof::profile
