// Gaps in live GPU readings and their filling from history: Prometheus's query_range answer,
// the gaps found in a run's readings, the readings a source's history puts into them (and only
// into them), the trace merged in time order, and the timeline taking filled readings in order.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kvprof/gpu/gap_fill.hpp"
#include "kvprof/gpu/prometheus_api.hpp"
#include "kvprof/gpu/remote_source.hpp"
#include "kvprof/profile/timeline.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"
#include "support/temp_dir.hpp"

namespace kvprof::gpu {
namespace {

constexpr int64_t k_ms = 1'000'000;  // ns

// A query_range answer: FB_USED and FB_FREE of GPUs 0 and 1 of node-a at t = 100 s and 101 s.
const char* k_matrix = R"({"status":"success","data":{"resultType":"matrix","result":[
 {"metric":{"__name__":"DCGM_FI_DEV_FB_USED","gpu":"1","Hostname":"node-a","UUID":"GPU-b"},
  "values":[[100,"2000"],[101,"2100"]]},
 {"metric":{"__name__":"DCGM_FI_DEV_FB_USED","gpu":"0","Hostname":"node-a","UUID":"GPU-a"},
  "values":[[100,"1000"],[101.5,"1500"]]},
 {"metric":{"__name__":"DCGM_FI_DEV_FB_FREE","gpu":"0","Hostname":"node-a","UUID":"GPU-a"},
  "values":[[100,"80000"]]}]}})";

TEST(PrometheusRange, GroupsTheMatrixByInstantInTimeOrder) {
  auto past = parse_prometheus_range_answer(k_matrix);
  ASSERT_TRUE(past) << past.error().message;
  ASSERT_EQ(past->size(), 3U);  // 100 s, 101 s, 101.5 s
  EXPECT_EQ((*past)[0].t_wall_ms, 100'000);
  EXPECT_EQ((*past)[1].t_wall_ms, 101'000);
  EXPECT_EQ((*past)[2].t_wall_ms, 101'500);
  const auto& first = (*past)[0].readings;
  ASSERT_EQ(first.size(), 2U);  // ordered by GPU index
  EXPECT_EQ(first[0].uuid, "GPU-a");
  EXPECT_EQ(first[0].used_bytes, 1000 * k_mib);
  EXPECT_EQ(first[0].free_bytes, 80000 * k_mib);
  EXPECT_EQ(first[1].used_bytes, 2000 * k_mib);
  ASSERT_EQ((*past)[1].readings.size(), 1U);
  EXPECT_EQ((*past)[1].readings[0].uuid, "GPU-b");
}

TEST(PrometheusRange, MalformedAnswersAreInputErrorsWithTheReason) {
  const auto error_of = [](const std::string& text) {
    auto past = parse_prometheus_range_answer(text);
    EXPECT_FALSE(past) << text;
    if (past) return std::string();
    EXPECT_EQ(past.error().kind, ErrorKind::input);
    return past.error().message;
  };
  EXPECT_NE(error_of(R"({"status":"error","errorType":"bad_data","error":"exceeded maximum )"
                     R"(resolution of 11,000 points per timeseries"})")
                .find("exceeded maximum resolution"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"status":"success","data":{"resultType":"vector","result":[]}})")
                .find("not a range matrix"),
            std::string::npos);
  const std::string series = R"({"metric":{"__name__":"DCGM_FI_DEV_FB_USED","gpu":"0"},)";
  const auto answer = [&](const std::string& values) {
    return R"({"status":"success","data":{"resultType":"matrix","result":[)" + series + values +
           "}]}}";
  };
  EXPECT_NE(error_of(answer(R"("value":[1,"2"])")).find("without \"values\""), std::string::npos);
  EXPECT_NE(error_of(answer(R"("values":[["1","2"]])")).find("[time, \"value\"]"),
            std::string::npos);
  EXPECT_NE(error_of(answer(R"("values":[[-5,"2"]])")).find("time out of range"),
            std::string::npos);
  EXPECT_NE(error_of(answer(R"("values":[[1e400,"2"]])")).find("not a JSON object"),
            std::string::npos);
  EXPECT_NE(error_of(answer(R"("values":[[1,"x"]])")).find("not a number"), std::string::npos);
  EXPECT_FALSE(parse_prometheus_range_answer("not json"));
  EXPECT_NE(error_of(answer(R"("values":[[1,"5e400"]])")).find("not a number"), std::string::npos);
  // An infinite reading is no reading: the instant has no GPU.
  auto inf = parse_prometheus_range_answer(answer(R"("values":[[1,"+Inf"]])"));
  ASSERT_TRUE(inf);
  ASSERT_EQ(inf->size(), 1U);
  EXPECT_TRUE(inf->front().readings.empty());
}

TEST(PrometheusRange, TargetAsksForTheSelectorsSeriesOverTheRangeInSeconds) {
  const auto selector = *parse_label_selector(R"({Hostname="node-a"})");
  const auto target = prometheus_range_target(selector, 1'700'000'000'250, 1'700'000'010'000, 200);
  EXPECT_TRUE(target.starts_with("/api/v1/query_range?query=")) << target;
  EXPECT_NE(target.find(percent_encode(dcgm_memory_query(selector))), std::string::npos);
  EXPECT_NE(target.find("&start=1700000000.250&end=1700000010.000&step=0.200"), std::string::npos)
      << target;
}

TEST(FindGaps, RegularReadingsHaveNoGap) {
  std::vector<SampleTime> live;
  for (int64_t t = 0; t <= 10'000; t += 1000)
    live.push_back({t * k_ms, 0});
  EXPECT_TRUE(find_gaps(live, {0}, 0, 10'400 * k_ms, 1000).empty());
}

TEST(FindGaps, FindsHolesInTheMiddleAtTheEndsAndPerGpu) {
  // GPU 0 read at 0..3 s and 7..8 s; GPU 1 only from 5 s; sampling from 0 to 12 s.
  std::vector<SampleTime> live;
  for (int64_t t : {0, 1, 2, 3, 7, 8})
    live.push_back({t * 1000 * k_ms, 0});
  for (int64_t t : {5, 6, 7, 8, 9, 10, 11})
    live.push_back({t * 1000 * k_ms, 1});
  live.push_back({5000 * k_ms, 7});  // a GPU that is not sampled
  const auto gaps = find_gaps(live, {0, 1}, 0, 12'000 * k_ms, 1000);
  ASSERT_EQ(gaps.size(), 3U);
  EXPECT_EQ(gaps[0].gpu, 0U);
  EXPECT_EQ(gaps[0].from_mono_ns, 3000 * k_ms);
  EXPECT_EQ(gaps[0].to_mono_ns, 7000 * k_ms);
  EXPECT_EQ(gaps[1].gpu, 0U);  // nothing after 8 s
  EXPECT_EQ(gaps[1].from_mono_ns, 8000 * k_ms);
  EXPECT_EQ(gaps[1].to_mono_ns, 12'000 * k_ms);
  EXPECT_EQ(gaps[2].gpu, 1U);  // nothing before 5 s
  EXPECT_EQ(gaps[2].from_mono_ns, 0);
  EXPECT_EQ(gaps[2].to_mono_ns, 5000 * k_ms);
}

TEST(FindGaps, AFastIntervalToleratesAScheduleHiccupButNotAnOutage) {
  std::vector<SampleTime> live;
  for (int64_t t : {0, 20, 40, 60, 260, 280, 700, 720})
    live.push_back({t * k_ms, 0});
  const auto gaps = find_gaps(live, {0}, 0, 730 * k_ms, 20);
  ASSERT_EQ(gaps.size(), 1U);  // 60 -> 260 ms is a hiccup, 280 -> 700 ms a gap
  EXPECT_EQ(gaps[0].from_mono_ns, 280 * k_ms);
  EXPECT_EQ(gaps[0].to_mono_ns, 700 * k_ms);
}

// A RemoteSource over one GPU whose live answer is fixed and whose history is a reading every
// second from 0 to 20 s (used = 1000 + t MiB); records what history was asked for.
struct HistorySource {
  std::vector<std::tuple<int64_t, int64_t, uint32_t>> asked;
  bool history_fails = false;

  std::unique_ptr<RemoteSource> make() {
    auto reading = [](uint64_t used_mib) {
      RemoteGpuReading r;
      r.key = "node-a/GPU-a";
      r.uuid = "GPU-a";
      r.gpu_label = 0;
      r.used_bytes = used_mib * k_mib;
      return r;
    };
    auto fetch = [reading]() -> Expected<std::vector<RemoteGpuReading>> {
      return std::vector<RemoteGpuReading>{reading(999)};
    };
    auto range = [this, reading](int64_t from, int64_t to,
                                 uint32_t step) -> Expected<std::vector<TimedRemoteReadings>> {
      asked.emplace_back(from, to, step);
      if (history_fails) return fail(ErrorKind::network, "answered HTTP 503 (overloaded)");
      std::vector<TimedRemoteReadings> out;
      for (int64_t t = 0; t <= 20; ++t) {
        RemoteGpuReading other = reading(5);
        other.key = "node-b/GPU-z";  // a GPU the run does not sample
        out.push_back({t * 1000, {reading(1000 + static_cast<uint64_t>(t)), other}});
      }
      return out;
    };
    return std::make_unique<RemoteSource>("test Prometheus", fetch, 0, range, "test history");
  }
};

TEST(FillGaps, PutsTheHistoryIntoTheGapsOnlyOnTheRunsClock) {
  HistorySource h;
  auto source = h.make();
  ASSERT_EQ(source->device_count().value_or(0), 1U);  // fixes the GPU list
  ASSERT_EQ(source->history_name(), "test history");
  // Live readings every second, wall = mono - 7 s; nothing between 3 s and 8 s (wall).
  const int64_t offset_ns = 7000 * k_ms;
  std::vector<SampleTime> live;
  for (int64_t t : {0, 1, 2, 3, 8, 9, 10})
    live.push_back({t * 1000 * k_ms + offset_ns, 0});
  const auto fill =
      fill_gaps(*source, live, {0}, offset_ns, 10'000 * k_ms + offset_ns, 1000, offset_ns);
  EXPECT_FALSE(fill.error);
  ASSERT_EQ(fill.gaps.size(), 1U);
  ASSERT_EQ(h.asked.size(), 1U);
  EXPECT_EQ(std::get<0>(h.asked[0]), 3000);  // wall ms
  EXPECT_EQ(std::get<1>(h.asked[0]), 8001);
  EXPECT_EQ(std::get<2>(h.asked[0]), 1000U);
  ASSERT_EQ(fill.filled.size(), 4U);  // 4, 5, 6, 7 s: not 3 or 8, which were read live
  for (size_t i = 0; i < fill.filled.size(); ++i) {
    const int64_t t_s = 4 + static_cast<int64_t>(i);
    EXPECT_EQ(fill.filled[i].t_wall_ms, t_s * 1000);
    EXPECT_EQ(fill.filled[i].t_mono_ns, t_s * 1000 * k_ms + offset_ns);
    EXPECT_EQ(fill.filled[i].memory.gpu, 0U);
    EXPECT_EQ(fill.filled[i].memory.used_bytes, static_cast<uint64_t>(1000 + t_s) * k_mib);
  }
}

TEST(FillGaps, NoGapAsksNothingAndAFailedHistoryIsNoted) {
  HistorySource h;
  auto source = h.make();
  ASSERT_TRUE(source->device_count());
  std::vector<SampleTime> live;
  for (int64_t t = 0; t <= 5; ++t)
    live.push_back({t * 1000 * k_ms, 0});
  auto fill = fill_gaps(*source, live, {0}, 0, 5000 * k_ms, 1000, 0);
  EXPECT_TRUE(fill.gaps.empty());
  EXPECT_TRUE(h.asked.empty());

  h.history_fails = true;
  live.resize(2);
  fill = fill_gaps(*source, live, {0}, 0, 5000 * k_ms, 1000, 0);
  ASSERT_EQ(fill.gaps.size(), 1U);
  EXPECT_TRUE(fill.filled.empty());
  ASSERT_TRUE(fill.error);
  EXPECT_NE(fill.error->find("HTTP 503 (overloaded)"), std::string::npos) << *fill.error;
}

TEST(FillGaps, ASourceWithoutHistoryLeavesTheGapOpen) {
  FakeSource nvml(1);
  EXPECT_FALSE(nvml.history_name());
  EXPECT_FALSE(nvml.history({0}, 0, 1000, 100));
  const auto fill = fill_gaps(nvml, {{0, 0}}, {0}, 0, 5000 * k_ms, 100, 0);
  ASSERT_EQ(fill.gaps.size(), 1U);
  EXPECT_FALSE(fill.history);
  EXPECT_TRUE(fill.filled.empty());
  EXPECT_FALSE(fill.error);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(MergeIntoTrace, FilledRowsTakeTheirPlaceInTimeOrder) {
  test::ScopedTempDir dir("kvprof_gap_fill");
  const std::string path = (dir.path / "gpu_mem_trace.csv").string();
  std::ofstream(path) << k_gpu_trace_header << "\n"
                      << "1000,1,device,0,,,,,10\n"
                      << "1500,1,process,0,42,,,,5\n"
                      << "5000,5,device,0,,,,,50\n";
  DeviceSample a{3000, 3, {}};
  a.memory.used_bytes = 30;
  DeviceSample b{2000, 2, {}};
  b.memory.used_bytes = 20;
  b.memory.total_bytes = 100;
  ASSERT_TRUE(merge_into_trace(path, {a, b}));
  EXPECT_EQ(slurp(path), std::string(k_gpu_trace_header) + "\n" +
                             "1000,1,device,0,,,,,10\n"
                             "1500,1,process,0,42,,,,5\n"
                             "2000,2,device,0,,100,,,20\n"
                             "3000,3,device,0,,,,,30\n"
                             "5000,5,device,0,,,,,50\n");
  EXPECT_FALSE(std::filesystem::exists(path + ".merging"));
  auto missing = merge_into_trace((dir.path / "nope.csv").string(), {a});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::io);
}

TEST(Timeline, ReadingsAddedLateTakeTheirPlaceInTime) {
  profile::Timeline timeline;
  timeline.add_memory_point({100, 0, 1, std::nullopt});
  timeline.add_memory_point({300, 0, 3, std::nullopt});
  timeline.add_memory_point({200, 0, 2, std::nullopt});
  const auto memory = timeline.memory();
  ASSERT_EQ(memory.size(), 3U);
  EXPECT_EQ(memory[0].used_bytes, 1U);
  EXPECT_EQ(memory[1].used_bytes, 2U);
  EXPECT_EQ(memory[2].used_bytes, 3U);
}

}  // namespace
}  // namespace kvprof::gpu
