// find-max: the search lands on the limit of any monotone trial within floor(log2(range)) + 3
// steps, from any start; the verdict names each limit that failed; queued requests are those
// whose first token came after another request had ended. End to end: `kvprof find-max` against
// a launched serve-sim lands where its KV cache runs out (the block count it reports over the
// blocks one request needs), and against `kvprof serve` (real libllama) on its slot count.
#include "kvprof/experiment/find_max.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kvprof/experiment/find_max_profile.hpp"
#include "support/run_kvprof.hpp"
#include "support/serve_process.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

namespace kvprof::experiment {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Trial limit_at(uint32_t limit, std::vector<uint32_t>* tried) {
  return [limit, tried](uint32_t c, uint32_t) -> Expected<TrialOutcome> {
    tried->push_back(c);
    TrialOutcome o;
    o.n_requests = c;
    o.n_ok = c;
    if (c > limit) o.preemptions = 1;
    return o;
  };
}

TEST(FindMax, LandsOnTheLimitWithinTheStepBoundFromAnyStart) {
  for (uint32_t max : {1U, 2U, 7U, 64U, 100U, 1000U}) {
    const uint32_t bound = find_max_step_bound(1, max);
    EXPECT_LE(bound, std::log2(static_cast<double>(max)) + 3);
    for (uint32_t limit = 0; limit <= max + 1; limit += std::max(1U, max / 37)) {
      std::vector<std::optional<uint32_t>> starts = {std::nullopt,      limit, limit + limit / 5,
                                                     limit - limit / 5, 1,     max};
      for (const auto& start : starts) {
        FindMaxLimits l;
        l.input_len = 8;
        l.output_len = 8;
        l.max_concurrency = max;
        l.start = start;
        std::vector<uint32_t> tried;
        auto r = find_max(l, limit_at(limit, &tried), nullptr, nullptr);
        ASSERT_TRUE(r.has_value());
        const std::string where = "max " + std::to_string(max) + " limit " + std::to_string(limit) +
                                  " start " + (start ? std::to_string(*start) : "none");
        if (limit == 0) {
          EXPECT_FALSE(r->answer) << where;
          EXPECT_EQ(r->first_fail, 1U) << where;
        } else {
          ASSERT_TRUE(r->answer) << where;
          EXPECT_EQ(*r->answer, std::min(limit, max)) << where;
          EXPECT_EQ(r->at_range_limit, limit >= max) << where;
        }
        EXPECT_LE(r->steps.size(), bound) << where;
        EXPECT_EQ(r->steps.size(), tried.size());
        // No concurrency is tried twice.
        std::sort(tried.begin(), tried.end());
        EXPECT_EQ(std::adjacent_find(tried.begin(), tried.end()), tried.end()) << where;
      }
    }
  }
}

TEST(FindMax, AGoodEstimateNeedsFewSteps) {
  FindMaxLimits l;
  l.input_len = 8;
  l.output_len = 8;
  l.max_concurrency = 1024;
  l.start = 300;
  std::vector<uint32_t> tried;
  auto r = find_max(l, limit_at(310, &tried), nullptr, nullptr);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->answer, 310U);
  EXPECT_EQ(tried.front(), 300U);
  EXPECT_EQ(tried[1], 375U);            // one step of 25% brackets it
  EXPECT_LE(r->steps.size(), 2U + 7U);  // then log2(75) bisections
  EXPECT_NE(r->margin.find("310 passes"), std::string::npos) << r->margin;
  EXPECT_NE(r->margin.find("311 fails"), std::string::npos) << r->margin;
}

TEST(FindMax, AnInterruptedTrialIsNotAResultAndEndsTheSearch) {
  // The limit is 40; the second trial is cut short by Ctrl-C (its requests all failed).
  FindMaxLimits l;
  l.input_len = 8;
  l.output_len = 8;
  l.max_concurrency = 64;
  l.start = 16;
  const Trial trial = [](uint32_t c, uint32_t step) -> Expected<TrialOutcome> {
    TrialOutcome o;
    o.n_requests = c;
    o.n_ok = step == 2 ? 0 : c;
    if (step == 2) {
      o.interrupted = true;
      o.first_error = "interrupted";
    }
    if (c > 40) o.preemptions = 1;
    return o;
  };
  auto r = find_max(l, trial, nullptr, nullptr);
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->steps.size(), 2U);
  EXPECT_TRUE(r->interrupted);
  EXPECT_EQ(r->answer, 16U);                // the one step that ended
  EXPECT_FALSE(r->first_fail.has_value());  // the interrupted step did not fail
  EXPECT_EQ(r->margin, "interrupted: the limit lies in 16..65");
  const json j = find_max_json(*r);
  EXPECT_TRUE(j.at("steps")[1].at("interrupted").get<bool>());
  EXPECT_FALSE(j.at("steps")[1].at("pass").get<bool>());
  EXPECT_EQ(j.at("first_failing_concurrency"), nullptr);
  EXPECT_NE(find_max_step_text(r->steps[1]).find("INTERRUPTED"), std::string::npos);

  // Cut short at the first step: nothing is known.
  const Trial first = [](uint32_t c, uint32_t) -> Expected<TrialOutcome> {
    TrialOutcome o;
    o.n_requests = c;
    o.interrupted = true;
    return o;
  };
  r = find_max(l, first, nullptr, nullptr);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->steps.size(), 1U);
  EXPECT_FALSE(r->answer.has_value());
  EXPECT_FALSE(r->first_fail.has_value());
  EXPECT_EQ(r->margin, "interrupted before any step ended: nothing is known yet");
}

TEST(FindMax, BadRangesAndTrialErrorsAreErrors) {
  FindMaxLimits l;
  l.input_len = 8;
  l.output_len = 8;
  l.min_concurrency = 10;
  l.max_concurrency = 5;
  std::vector<uint32_t> tried;
  EXPECT_EQ(find_max(l, limit_at(3, &tried), nullptr, nullptr).error().kind, ErrorKind::usage);
  l.min_concurrency = 1;
  l.output_len = 0;
  EXPECT_EQ(find_max(l, limit_at(3, &tried), nullptr, nullptr).error().kind, ErrorKind::usage);
  l.output_len = 8;
  const Trial broken = [](uint32_t, uint32_t) -> Expected<TrialOutcome> {
    return fail(ErrorKind::network, "gone");
  };
  EXPECT_EQ(find_max(l, broken, nullptr, nullptr).error().message, "gone");
  // A stop request ends the search with what it knows.
  int calls = 0;
  auto r = find_max(l, limit_at(3, &tried), nullptr, [&] { return ++calls > 1; });
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->interrupted);
}

TEST(FindMax, VerdictNamesEveryLimitThatFailed) {
  FindMaxLimits l;
  l.slo_ttft_ms = 100;
  l.slo_itl_ms = 10;
  l.max_memory_frac = 0.9;
  TrialOutcome o;
  o.concurrency = 8;
  o.n_requests = 8;
  o.n_ok = 8;
  o.preemptions = 0;
  o.ttft_p99_ms = 50;
  o.itl_p99_ms = 5;
  o.memory_frac = 0.5;
  o.peak_kv_cache_usage = 0.75;
  auto v = judge_trial(o, l);
  EXPECT_TRUE(v.pass) << v.why;
  EXPECT_NE(v.why.find("KV peak 75.0%"), std::string::npos) << v.why;
  EXPECT_NE(v.why.find("TTFT p99 50.0 ms <= 100.0 ms"), std::string::npos) << v.why;
  o.ttft_p99_ms = 150;
  o.memory_frac = 0.95;
  o.queued_requests = 3;
  o.n_ok = 7;
  o.first_error = "HTTP 500";
  v = judge_trial(o, l);
  EXPECT_FALSE(v.pass);
  for (const char* part : {"1 of 8 requests failed (HTTP 500)", "3 of 8 requests queued",
                           "memory 95.0% > 90.0%", "TTFT p99 150.0 ms > SLO 100.0 ms"}) {
    EXPECT_NE(v.why.find(part), std::string::npos) << part << " in " << v.why;
  }
  // Queueing the server's gauges show, when the request timings did not.
  o = {};
  o.concurrency = 6;
  o.n_requests = 6;
  o.n_ok = 6;
  o.peak_running = 4;
  o.peak_waiting = 2;
  v = judge_trial(o, {});
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.why.find("the server ran at most 4 of 6 at once (2 waiting)"), std::string::npos)
      << v.why;
  o.peak_running = 6;  // waiting only while they were being admitted
  EXPECT_TRUE(judge_trial(o, {}).pass);
  o = {};
  o.concurrency = 4;
  o.n_requests = 4;
  o.n_ok = 4;
  o.preemptions = 2;
  v = judge_trial(o, {});
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.why.find("2 preemptions"), std::string::npos) << v.why;
}

client::RequestRecord record(int64_t send, int64_t first, int64_t end) {
  client::RequestRecord r;
  r.actual_send_ns = send;
  r.first_token_ns = first;
  r.end_ns = end;
  return r;
}

TEST(FindMax, QueuedRequestsGotTheirFirstTokenAfterAnotherEnded) {
  // Two ran together; the third waited for the first to end.
  EXPECT_EQ(count_queued({record(0, 10, 100), record(0, 12, 110), record(0, 105, 200)}), 1U);
  EXPECT_EQ(count_queued({record(0, 10, 100), record(0, 12, 110), record(0, 14, 120)}), 0U);
  // Closed loop: a request sent after another ended is not queued behind it.
  EXPECT_EQ(count_queued({record(0, 10, 100), record(101, 110, 200)}), 0U);
  auto failed = record(0, client::k_no_time, client::k_no_time);
  failed.status = client::RequestStatus::error;
  EXPECT_EQ(count_queued({record(0, 10, 100), failed}), 0U);
}

class FindMaxE2E : public test::TempDirTest {
 protected:
  FindMaxE2E() : TempDirTest("kvprof_find_max") {}
  json find_max(const std::string& args, int expected_rc = 0) const {
    const auto r = test::run_kvprof("find-max --output-dir " + (m_dir / "results").string() +
                                    " -q --json " + args);
    EXPECT_EQ(r.rc, expected_rc) << r.out;
    json j = test::json_in(r.out);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }
};

TEST_F(FindMaxE2E, LandsWhereTheSimulatedKvCacheRunsOut) {
  const std::string launch = std::string(KVPROF_BIN) +
                             " serve-sim --model {model} --gpu H100 --host {host} --port {port} "
                             "--num-gpu-blocks 60 --block-size 16 --max-model-len 512";
  const json j = find_max("--launch \"" + launch +
                          "\" --model sim --input-len 64 --output-len 32 --max-concurrency 64");
  ASSERT_TRUE(j.is_object());
  const auto& steps = j.at("steps");
  ASSERT_FALSE(steps.empty());
  // The engine's own capacity: its block count over the blocks one request needs
  // (64 + 32 - 1 tokens computed, 16 per block).
  const auto& o = steps[0].at("outcome");
  ASSERT_EQ(o.at("num_gpu_blocks"), 60) << o;
  const uint64_t blocks = o.at("num_gpu_blocks");
  const uint64_t block_size = o.at("block_size_tokens");
  const uint64_t capacity = blocks / ((64 + 32 - 1 + block_size - 1) / block_size);
  EXPECT_EQ(j.at("max_concurrency"), capacity) << j.dump(1);
  EXPECT_EQ(j.at("first_failing_concurrency"), capacity + 1);
  EXPECT_LE(j.at("n_steps").get<uint32_t>(), static_cast<uint32_t>(std::log2(64.0)) + 3);
  EXPECT_EQ(j.at("n_steps"), steps.size());
  EXPECT_EQ(j.at("grid_steps"), 64);
  // Every step kept its run folder.
  for (const auto& s : steps) {
    EXPECT_TRUE(
        fs::exists(fs::path(s.at("outcome").at("run_dir").get<std::string>()) / "summary.json"))
        << s;
  }
  const fs::path dir = j.at("run_dir").get<std::string>();
  EXPECT_TRUE(fs::exists(dir / "find_max.json"));
  EXPECT_TRUE(fs::exists(dir / "server.log"));
}

TEST_F(FindMaxE2E, TheBuiltInSimulatorStartsFromAnEstimateAndHonoursTheSlo) {
  // An impossible TTFT SLO: nothing passes, exit 1, and the steps say why.
  const json j = find_max(
      "--model sim --sim-num-gpu-blocks 200 --input-len 32 --output-len 8 --max-concurrency 8 "
      "--slo-ttft-ms 0.001 --estimate-with \"--model meta-llama/Llama-3.1-8B-Instruct --gpu "
      "H100 --max-num-seqs 4\"",
      1);
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(j.at("max_concurrency").is_null());
  EXPECT_EQ(j.at("start"), 4);
  EXPECT_NE(j.at("start_source").get<std::string>().find("kvprof estimate"), std::string::npos);
  EXPECT_NE(j.at("steps")[0].at("why").get<std::string>().find("> SLO 0.0 ms"), std::string::npos)
      << j.at("steps")[0];
}

TEST_F(FindMaxE2E, LandsOnTheSlotsOfTheRealLlamaCppServer) {
  KVPROF_REQUIRE_LLAMA_OR_SKIP(lib_dir);
  ASSERT_TRUE(test::write_dummy_llama(m_dir / "tiny.gguf", 32000));
  // 4 slots of 256 cells each: a fifth request waits for a free slot.
  const std::string launch = std::string(KVPROF_BIN) + " serve -m " +
                             (m_dir / "tiny.gguf").string() + " --llama-lib " + lib_dir->string() +
                             " --port {port} -t 1 -c 1024 -np 4 --metrics --quiet";
  const json j =
      find_max("--launch \"" + launch + "\" --input-len 64 --output-len 48 --max-concurrency 16");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.at("max_concurrency"), 4) << j.dump(1);
  EXPECT_LE(j.at("n_steps").get<uint32_t>(), static_cast<uint32_t>(std::log2(16.0)) + 3);
  for (const auto& s : j.at("steps")) {
    if (s.at("concurrency").get<uint32_t>() > 4) {
      const std::string why = s.at("why");
      EXPECT_TRUE(why.find("queued behind others") != std::string::npos ||
                  why.find("the server ran at most 4 of") != std::string::npos)
          << s;
    }
  }
}

}  // namespace
}  // namespace kvprof::experiment
