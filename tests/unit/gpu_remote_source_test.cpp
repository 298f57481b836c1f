// Remote GPU memory: label selectors, DCGM exporter text (NVIDIA's own example output), the
// Prometheus API answer, the RemoteSource's fixed GPU list and refresh, and the choice between
// NVML and no source for a server that is not on this machine.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <sstream>
#include <string>

#include "kvprof/gpu/dcgm.hpp"
#include "kvprof/gpu/prometheus_api.hpp"
#include "kvprof/gpu/remote_source.hpp"
#include "kvprof/gpu/source_select.hpp"
#include "kvprof/util/net.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::gpu {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(LabelSelector, ParsesEveryOperatorWithAndWithoutBraces) {
  auto m = parse_label_selector(R"({Hostname="node1", gpu=~"0|1",modelName!="x",job!~"a.*"})");
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_EQ(m->size(), 4U);
  EXPECT_EQ((*m)[0].name, "Hostname");
  EXPECT_EQ((*m)[0].op, LabelMatcher::Op::equal);
  EXPECT_EQ((*m)[1].op, LabelMatcher::Op::regex);
  EXPECT_EQ((*m)[2].op, LabelMatcher::Op::not_equal);
  EXPECT_EQ((*m)[3].op, LabelMatcher::Op::not_regex);
  auto bare = parse_label_selector(R"(Hostname="a\"b")");
  ASSERT_TRUE(bare);
  EXPECT_EQ((*bare)[0].value, "a\"b");
  EXPECT_TRUE(parse_label_selector("")->empty());
  EXPECT_TRUE(parse_label_selector("{}")->empty());
}

TEST(LabelSelector, RejectsMalformedSelectorsWithTheReason) {
  for (const char* bad :
       {R"({Hostname=node1})", R"({Hostname="node1")", R"({="x"})", R"({a="1" b="2"})",
        R"({a<"1"})", R"({a=~"[z"})", R"({a="unterminated})"}) {
    auto m = parse_label_selector(bad);
    ASSERT_FALSE(m) << bad;
    EXPECT_EQ(m.error().kind, ErrorKind::input);
  }
  EXPECT_FALSE(parse_label_selector(std::string(2000, 'a')));
}

TEST(LabelSelector, RefusesRepetitionCountsPrometheusRefuses) {
  // std::regex expands a{n} into n copies (and overflows on a huge n); Prometheus's RE2 caps n
  // at 1000, and so does kvprof.
  for (const char* bad :
       {R"({gpu=~"0{1111111111111111111}"})", R"({gpu=~"a{2,1001}"})", R"({gpu!~"(ab){1001}"})"}) {
    auto m = parse_label_selector(bad);
    ASSERT_FALSE(m) << bad;
    EXPECT_EQ(m.error().kind, ErrorKind::input);
    EXPECT_NE(m.error().message.find("repetition count above 1000"), std::string::npos)
        << m.error().message;
  }
  EXPECT_TRUE(parse_label_selector(R"({gpu=~"[0-7]{1,1000}"})"));
  EXPECT_TRUE(parse_label_selector(R"({gpu=~"\\{99999}"})"));  // an escaped brace is a literal
}

TEST(LabelSelector, MatchesLikePrometheus) {
  const std::map<std::string, std::string> labels{{"Hostname", "node1"}, {"gpu", "1"}};
  const auto sel = [](const char* s) { return *parse_label_selector(s); };
  EXPECT_TRUE(labels_match(labels, sel(R"({Hostname="node1"})")));
  EXPECT_FALSE(labels_match(labels, sel(R"({Hostname="node2"})")));
  EXPECT_TRUE(labels_match(labels, sel(R"({gpu=~"0|1"})")));
  EXPECT_FALSE(labels_match(labels, sel(R"({gpu=~"1."})")));  // anchored: whole value
  EXPECT_TRUE(labels_match(labels, sel(R"({job!="x"})")));    // a missing label is ""
  EXPECT_FALSE(labels_match(labels, sel(R"({Hostname!~"node.*"})")));
}

TEST(Dcgm, ReadsNvidiasExampleOutputInMib) {
  const auto text = read_file(KVPROF_FIXTURES_DIR "/dcgm/nvidia_gpu_telemetry_a100.txt");
  ASSERT_FALSE(text.empty());
  auto readings = parse_dcgm_metrics(text);
  ASSERT_TRUE(readings) << readings.error().message;
  ASSERT_EQ(readings->size(), 1U);  // the MIG instance's series carry no framebuffer gauges
  const auto& r = readings->front();
  EXPECT_EQ(r.hostname, "ub20-a100-k8s");
  EXPECT_EQ(r.uuid, "GPU-34319582-d595-d1c7-d1d2-179bcfa61660");
  EXPECT_EQ(r.gpu_label, 0U);
  EXPECT_EQ(r.used_bytes, 4845 * k_mib);
  EXPECT_EQ(r.free_bytes, 35690 * k_mib);
  const auto m = to_device_memory(r, 0);
  EXPECT_EQ(m.total_bytes, (4845 + 35690) * k_mib);
  EXPECT_FALSE(m.reserved_bytes);
}

TEST(Dcgm, GroupsGpusOfSeveralHostsAndAppliesTheSelector) {
  const std::string text = R"(# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b1",Hostname="b",modelName="NVIDIA L40S"} 200
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-b0",Hostname="b",modelName="NVIDIA L40S"} 100
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a0",Hostname="a",modelName="NVIDIA H100 80GB HBM3"} 300
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-b0",Hostname="b",modelName="NVIDIA L40S"} 46000
DCGM_FI_DEV_FB_RESERVED{gpu="0",UUID="GPU-b0",Hostname="b",modelName="NVIDIA L40S"} 500
DCGM_FI_DEV_FB_USED{Hostname="b"} 7
DCGM_FI_DEV_FB_USED{gpu="2",UUID="GPU-b2",Hostname="b"} NaN
this line is not exposition
)";
  auto all = parse_dcgm_metrics(text);
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_EQ(all->size(), 3U);           // the series naming no GPU and the NaN one are dropped
  EXPECT_EQ((*all)[0].uuid, "GPU-a0");  // ordered by host, then GPU index
  EXPECT_EQ((*all)[1].uuid, "GPU-b0");
  EXPECT_EQ((*all)[2].uuid, "GPU-b1");
  const auto m = to_device_memory((*all)[1], 1);
  EXPECT_EQ(m.total_bytes, (100 + 46000 + 500) * k_mib);
  EXPECT_EQ(m.reserved_bytes, 500 * k_mib);

  auto b_only = parse_dcgm_metrics(text, *parse_label_selector(R"({Hostname="b",gpu="1"})"));
  ASSERT_TRUE(b_only);
  ASSERT_EQ(b_only->size(), 1U);
  EXPECT_EQ(b_only->front().used_bytes, 200 * k_mib);
}

constexpr const char* k_prom_answer = R"({"status":"success","data":{"resultType":"vector",
  "result":[
   {"metric":{"__name__":"DCGM_FI_DEV_FB_FREE","Hostname":"node1","UUID":"GPU-1","gpu":"0",
              "instance":"10.0.0.5:9400","job":"dcgm","modelName":"NVIDIA H100 80GB HBM3"},
    "value":[1795552773.052,"35690"]},
   {"metric":{"__name__":"DCGM_FI_DEV_FB_USED","Hostname":"node1","UUID":"GPU-1","gpu":"0",
              "instance":"10.0.0.5:9400","job":"dcgm","modelName":"NVIDIA H100 80GB HBM3"},
    "value":[1795552773.052,"4845"]}]}})";

TEST(PrometheusApi, ReadsAnInstantVectorAnswer) {
  auto readings = parse_prometheus_query_answer(k_prom_answer);
  ASSERT_TRUE(readings) << readings.error().message;
  ASSERT_EQ(readings->size(), 1U);
  EXPECT_EQ(readings->front().model_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(readings->front().used_bytes, 4845 * k_mib);
  EXPECT_EQ(readings->front().free_bytes, 35690 * k_mib);
}

TEST(PrometheusApi, ReportsPrometheusErrorsAndMalformedAnswers) {
  auto err = parse_prometheus_query_answer(
      R"({"status":"error","errorType":"bad_data","error":"parse error at char 5"})");
  ASSERT_FALSE(err);
  EXPECT_NE(err.error().message.find("parse error at char 5"), std::string::npos);
  for (
      const char* bad :
      {"", "[]", "not json", R"({"status":"success"})",
       R"({"status":"success","data":{"resultType":"matrix","result":[]}})",
       R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"2"]}]}})",
       R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}})",
       R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}})",
       R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"n":"1"},"value":[1,"5e400"]}]}})"}) {
    auto r = parse_prometheus_query_answer(bad);
    EXPECT_FALSE(r && !r->empty()) << bad;
    if (!r) {
      EXPECT_EQ(r.error().kind, ErrorKind::input) << bad;
    }
  }
}

TEST(PrometheusApi, QueryAsksForTheFramebufferSeriesOfTheSelector) {
  const auto q = dcgm_memory_query(*parse_label_selector(R"({Hostname="node\"1",gpu=~"0|1"})"));
  EXPECT_EQ(
      q,
      R"q({__name__=~"DCGM_FI_DEV_FB_(USED|FREE|RESERVED|TOTAL)",Hostname="node\"1",gpu=~"0|1"})q");
  EXPECT_EQ(percent_encode("a b{\"}~"), "a%20b%7B%22%7D~");
}

TEST(RemoteSource, FixesTheGpuListAndReusesAFetchWithinTheRefreshTime) {
  int fetches = 0;
  uint64_t used_mib = 100;
  bool second_gpu = true;
  auto fetch = [&]() -> Expected<std::vector<RemoteGpuReading>> {
    ++fetches;
    std::vector<RemoteGpuReading> readings;
    add_dcgm_sample(readings, "DCGM_FI_DEV_FB_USED", {{"gpu", "0"}, {"Hostname", "h"}},
                    static_cast<double>(used_mib));
    if (second_gpu) {
      add_dcgm_sample(readings, "DCGM_FI_DEV_FB_USED", {{"gpu", "1"}, {"Hostname", "h"}}, 1);
    }
    return readings;
  };
  RemoteSource cached("test", fetch, 60'000);
  EXPECT_EQ(cached.device_count(), 2U);
  EXPECT_EQ(cached.sample_device(0)->used_bytes, 100 * k_mib);
  EXPECT_EQ(cached.sample_device(1)->used_bytes, 1 * k_mib);
  EXPECT_EQ(fetches, 1);
  EXPECT_FALSE(cached.sample_device(2));
  EXPECT_TRUE(cached.sample_processes(0)->empty());

  fetches = 0;
  RemoteSource live("test", fetch, 0);
  EXPECT_EQ(live.device_count(), 2U);
  used_mib = 300;
  second_gpu = false;
  EXPECT_EQ(live.sample_device(0)->used_bytes, 300 * k_mib);
  auto gone = live.sample_device(1);  // the list stays fixed: a vanished GPU is an error
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().message.find("missing"), std::string::npos);
  EXPECT_EQ(live.device_count(), 2U);
  EXPECT_EQ(fetches, 4);
}

TEST(RemoteSource, NoFramebufferSeriesIsNotFound) {
  RemoteSource empty(
      "DCGM exporter x",
      [] { return Expected<std::vector<RemoteGpuReading>>(std::vector<RemoteGpuReading>{}); }, 0);
  auto n = empty.device_count();
  ASSERT_FALSE(n);
  EXPECT_EQ(n.error().kind, ErrorKind::not_found);
  EXPECT_NE(n.error().message.find("DCGM exporter x"), std::string::npos);
}

TEST(GpuSource, ParsesEveryForm) {
  EXPECT_EQ(parse_gpu_source("auto")->kind, GpuSourceKind::automatic);
  EXPECT_EQ(parse_gpu_source("nvml")->kind, GpuSourceKind::nvml);
  EXPECT_EQ(parse_gpu_source("none")->kind, GpuSourceKind::none);
  auto dcgm = parse_gpu_source("dcgm=http://node1:9400/metrics");
  ASSERT_TRUE(dcgm);
  EXPECT_EQ(dcgm->kind, GpuSourceKind::dcgm);
  EXPECT_EQ(dcgm->url, "http://node1:9400/metrics");
  EXPECT_EQ(parse_gpu_source("prometheus=https://prom:9090")->kind, GpuSourceKind::prometheus);
  for (const char* bad : {"dcgm", "dcgm=node1:9400", "nvidia", "prometheus=", "Auto"}) {
    auto r = parse_gpu_source(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().kind, ErrorKind::usage);
  }
}

TEST(GpuSource, ARemoteServerGetsNoLocalGpusAndAWarning) {
  auto remote = open_gpu_source({}, "", "http://192.0.2.10:8000/v1", 500);
  ASSERT_TRUE(remote);
  EXPECT_EQ(remote->source, nullptr);
  EXPECT_EQ(remote->name, "none");
  EXPECT_TRUE(remote->warn);
  EXPECT_NE(remote->note.find("192.0.2.10 is not on this machine"), std::string::npos);
  EXPECT_NE(remote->note.find("--gpu-source"), std::string::npos);

  // On this machine: NVML is tried (this test machine has none: a quiet note, no warning).
  auto local = open_gpu_source({}, "", "http://127.0.0.1:8000/v1", 500);
  ASSERT_TRUE(local);
  EXPECT_FALSE(local->warn);
  EXPECT_NE(local->name, "dcgm");
  auto none = open_gpu_source({GpuSourceKind::none, ""}, "", "http://127.0.0.1:8000", 500);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->source, nullptr);
  EXPECT_FALSE(open_gpu_source({}, "{bad", "http://127.0.0.1:8000", 500));
}

TEST(Net, UrlHostAndLocalHost) {
  EXPECT_EQ(url_host("http://127.0.0.1:8000/v1"), "127.0.0.1");
  EXPECT_EQ(url_host("https://[::1]:8443/x"), "::1");
  EXPECT_EQ(url_host("http://user:pw@node-3:80/metrics"), "node-3");
  EXPECT_EQ(url_host("HTTP://Node"), "Node");
  EXPECT_FALSE(url_host("node:80"));
  EXPECT_FALSE(url_host("http:///v1"));
  EXPECT_TRUE(is_local_host("localhost"));
  EXPECT_TRUE(is_local_host("127.0.0.1"));
  std::array<char, 256> name{};
  ASSERT_EQ(gethostname(name.data(), name.size() - 1), 0);
  EXPECT_TRUE(is_local_host(name.data()));
  EXPECT_FALSE(is_local_host("192.0.2.10"));  // TEST-NET-1: never assigned to a machine
}

}  // namespace
}  // namespace kvprof::gpu
