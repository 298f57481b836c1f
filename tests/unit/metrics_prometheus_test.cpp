#include "kvprof/metrics/prometheus.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "support/test_data.hpp"

namespace kvprof::metrics {
namespace {

Exposition parse_ok(std::string_view text) {
  auto result = parse_prometheus_text(text);
  EXPECT_TRUE(result.has_value()) << (result ? "" : result.error().message);
  return result ? std::move(*result) : Exposition{};
}

std::string strict_error(std::string_view text) {
  auto result = parse_prometheus_text(text);
  EXPECT_FALSE(result.has_value());
  if (result) return {};
  EXPECT_EQ(result.error().kind, ErrorKind::input);
  return result.error().message;
}

TEST(PrometheusParser, HelpTypeAndSimpleSamples) {
  const auto expo = parse_ok(
      "# HELP http_requests_total The total number of HTTP requests.\n"
      "# TYPE http_requests_total counter\n"
      "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
      "http_requests_total{method=\"post\",code=\"400\"}    3 1395066363000\n"
      "\n"
      "# A normal comment\n"
      "metric_without_timestamp_and_labels 12.47\n");
  ASSERT_EQ(expo.families.size(), 2U);
  const auto& req = expo.families[0];
  EXPECT_EQ(req.name, "http_requests_total");
  EXPECT_EQ(req.type, MetricType::counter);
  EXPECT_EQ(req.help, "The total number of HTTP requests.");
  ASSERT_EQ(req.samples.size(), 2U);
  EXPECT_EQ(req.samples[0].value, 1027.0);
  EXPECT_EQ(req.samples[0].timestamp_ms, 1395066363000);
  ASSERT_NE(req.samples[1].label("code"), nullptr);
  EXPECT_EQ(*req.samples[1].label("code"), "400");
  EXPECT_EQ(req.samples[1].label("missing"), nullptr);
  const auto& plain = expo.families[1];
  EXPECT_EQ(plain.type, MetricType::untyped);
  EXPECT_EQ(plain.samples[0].value, 12.47);
  EXPECT_FALSE(plain.samples[0].timestamp_ms.has_value());
  EXPECT_EQ(expo.n_samples, 3U);
}

TEST(PrometheusParser, LabelEscapesAndHelpEscapes) {
  const auto expo = parse_ok(
      "# HELP msdos_file_access_time_seconds Line one\\nwith a \\\\ backslash\n"
      "msdos_file_access_time_seconds{path=\"C:\\\\DIR\\\\FILE.TXT\",error=\"Cannot find file:\\n"
      "\\\"FILE.TXT\\\"\"} 1.458255915e9\n");
  const auto* family = expo.find("msdos_file_access_time_seconds");
  ASSERT_NE(family, nullptr);
  EXPECT_EQ(family->help, "Line one\nwith a \\ backslash");
  ASSERT_EQ(family->samples.size(), 1U);
  const auto& s = family->samples[0];
  EXPECT_EQ(*s.label("path"), "C:\\DIR\\FILE.TXT");
  EXPECT_EQ(*s.label("error"), "Cannot find file:\n\"FILE.TXT\"");
  EXPECT_DOUBLE_EQ(s.value, 1.458255915e9);
}

TEST(PrometheusParser, SpecialValuesAndScientificNotation) {
  const auto ok = parse_ok("a NaN\nb +Inf\nc -Inf\nd 1.5e-3\ne -2E+2\nf Inf\n");
  EXPECT_TRUE(std::isnan(ok.find("a")->samples[0].value));
  EXPECT_EQ(ok.find("b")->samples[0].value, INFINITY);
  EXPECT_EQ(ok.find("c")->samples[0].value, -INFINITY);
  EXPECT_DOUBLE_EQ(ok.find("d")->samples[0].value, 0.0015);
  EXPECT_DOUBLE_EQ(ok.find("e")->samples[0].value, -200.0);
  EXPECT_EQ(ok.find("f")->samples[0].value, INFINITY);
}

TEST(PrometheusParser, ValueParserRejectsWhatTheFormatDoesNot) {
  EXPECT_FALSE(parse_prometheus_value("0x10").has_value());
  EXPECT_FALSE(parse_prometheus_value("").has_value());
  EXPECT_FALSE(parse_prometheus_value("1,5").has_value());
  EXPECT_FALSE(parse_prometheus_value("--1").has_value());
  EXPECT_FALSE(parse_prometheus_value("nan(1)").has_value());
  EXPECT_FALSE(parse_prometheus_value("1e999").has_value());
  EXPECT_EQ(parse_prometheus_value("+12").value(), 12.0);
  EXPECT_EQ(parse_prometheus_value(".5").value(), 0.5);
}

TEST(PrometheusParser, CrlfTrailingWhitespaceAndTabs) {
  const auto expo = parse_ok("# TYPE x gauge\r\nx{a=\"1\"}\t 3 \t\r\n\r\n   \r\ny 4   \r\n");
  ASSERT_NE(expo.find("x"), nullptr);
  EXPECT_EQ(expo.find("x")->type, MetricType::gauge);
  EXPECT_EQ(expo.find("x")->samples[0].value, 3.0);
  EXPECT_EQ(expo.find("y")->samples[0].value, 4.0);
}

TEST(PrometheusParser, HistogramSamplesGroupUnderTheirFamily) {
  const auto expo = parse_ok(
      "# HELP rpc_duration_seconds A histogram\n"
      "# TYPE rpc_duration_seconds histogram\n"
      "rpc_duration_seconds_bucket{le=\"0.05\"} 24054\n"
      "rpc_duration_seconds_bucket{le=\"0.1\"} 33444\n"
      "rpc_duration_seconds_bucket{le=\"+Inf\"} 144320\n"
      "rpc_duration_seconds_sum 53423\n"
      "rpc_duration_seconds_count 144320\n"
      "# TYPE other gauge\n"
      "other 1\n");
  ASSERT_EQ(expo.families.size(), 2U);
  const auto& h = expo.families[0];
  EXPECT_EQ(h.type, MetricType::histogram);
  ASSERT_EQ(h.samples.size(), 5U);
  EXPECT_EQ(h.samples[2].name, "rpc_duration_seconds_bucket");
  EXPECT_EQ(*h.samples[2].label("le"), "+Inf");
  EXPECT_EQ(h.samples[4].name, "rpc_duration_seconds_count");
  EXPECT_EQ(h.samples[4].value, 144320.0);
}

TEST(PrometheusParser, SummaryWithQuantiles) {
  const auto expo = parse_ok(
      "# TYPE rpc summary\n"
      "rpc{quantile=\"0.5\"} 4773\n"
      "rpc{quantile=\"0.99\"} 76656\n"
      "rpc_sum 1.7560473e+07\n"
      "rpc_count 2693\n");
  ASSERT_EQ(expo.families.size(), 1U);
  EXPECT_EQ(expo.families[0].samples.size(), 4U);
  EXPECT_NE(strict_error("# TYPE rpc summary\nrpc 4773\n").find("quantile"), std::string::npos);
}

TEST(PrometheusParser, BucketWithoutLeIsAnError) {
  const auto msg = strict_error("# TYPE h histogram\nh_bucket{x=\"1\"} 1\n");
  EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
}

TEST(PrometheusParser, StrictErrorsCarryTheLineNumber) {
  struct Case {
    std::string text;
    std::string line;
  };
  const std::vector<Case> cases{
      {"ok 1\nbad{a=\"1\" 2\n", "line 2:"},
      {"ok 1\n\n# TYPE x gauge\nx{a=1} 2\n", "line 4:"},
      {"x 1\nx{a=\"b\\q\"} 2\n", "line 2:"},
      {"x{a=\"1\",a=\"2\"} 1\n", "line 1:"},
      {"x\n", "line 1:"},
      {"x 1 2 3\n", "line 1:"},
      {"x 1 notatime\n", "line 1:"},
      {"1x 2\n", "line 1:"},
      {"# TYPE x gauge\n# TYPE x counter\n", "line 2:"},
      {"# TYPE x nonsense\n", "line 1:"},
      {"# HELP x a\n# HELP x b\n", "line 2:"},
      {"x 1\n# TYPE x gauge\n", "line 2:"},
      {"x{a=\"unterminated} 1\n", "line 1:"},
  };
  for (const auto& c : cases) {
    const auto msg = strict_error(c.text);
    EXPECT_NE(msg.find(c.line), std::string::npos) << c.text << " -> " << msg;
  }
}

TEST(PrometheusParser, LenientModeSkipsAndCounts) {
  ParseOptions options;
  options.strict = false;
  const auto result = parse_prometheus_text(
      "good 1\nbad{ 2\nalso_good{a=\"x\"} 3\n# TYPE t nonsense\nnot a sample\n", options);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->n_skipped_lines, 3U);
  EXPECT_EQ(result->first_skip_reason.rfind("line 2:", 0), 0U) << result->first_skip_reason;
  EXPECT_EQ(result->n_samples, 2U);
  EXPECT_EQ(result->find("also_good")->samples[0].value, 3.0);
}

TEST(PrometheusParser, BoundsOnLinesLabelsAndSamples) {
  ParseOptions options;
  options.max_line_bytes = 64;
  const std::string long_line = "x{a=\"" + std::string(100, 'v') + "\"} 1\n";
  EXPECT_FALSE(parse_prometheus_text(long_line, options).has_value());
  options.strict = false;
  const auto lenient = parse_prometheus_text(long_line + "y 2\n", options);
  ASSERT_TRUE(lenient.has_value());
  EXPECT_EQ(lenient->n_skipped_lines, 1U);
  EXPECT_NE(lenient->find("y"), nullptr);

  ParseOptions label_bound;
  label_bound.max_labels_per_sample = 2;
  EXPECT_TRUE(parse_prometheus_text("x{a=\"1\",b=\"2\"} 1\n", label_bound).has_value());
  EXPECT_FALSE(parse_prometheus_text("x{a=\"1\",b=\"2\",c=\"3\"} 1\n", label_bound).has_value());

  ParseOptions sample_bound;
  sample_bound.max_samples = 3;
  sample_bound.strict = false;
  EXPECT_TRUE(parse_prometheus_text("a 1\nb 1\nc 1\n", sample_bound).has_value());
  const auto too_many = parse_prometheus_text("a 1\nb 1\nc 1\nd 1\n", sample_bound);
  ASSERT_FALSE(too_many.has_value());
  EXPECT_NE(too_many.error().message.find("more than 3 samples"), std::string::npos);
}

TEST(PrometheusParser, DefaultLineBoundIs64KiB) {
  const std::string ok_line = "x{a=\"" + std::string(60 * 1024, 'v') + "\"} 1\n";
  EXPECT_TRUE(parse_prometheus_text(ok_line).has_value());
  const std::string long_line = "x{a=\"" + std::string(65 * 1024, 'v') + "\"} 1\n";
  EXPECT_FALSE(parse_prometheus_text(long_line).has_value());
}

TEST(PrometheusParser, OpenMetricsTextIsTolerated) {
  const auto expo = parse_ok(
      "# TYPE vllm:num_preemptions counter\n"
      "# HELP vllm:num_preemptions Cumulative number of preemption from the engine.\n"
      "vllm:num_preemptions_total{engine=\"0\"} 3.0\n"
      "vllm:num_preemptions_created{engine=\"0\"} 1.7525321e+09\n"
      "# TYPE latency_seconds histogram\n"
      "# UNIT latency_seconds seconds\n"
      "latency_seconds_bucket{le=\"1.0\"} 2 # {trace_id=\"abc\"} 0.67 1.5e9\n"
      "latency_seconds_bucket{le=\"+Inf\"} 3\n"
      "latency_seconds_count 3\n"
      "latency_seconds_sum 4.5\n"
      "latency_seconds_created 1.7e9\n"
      "# TYPE build info\n"
      "build_info{version=\"1.2\"} 1 1700000000.5\n"
      "# EOF\n");
  EXPECT_TRUE(expo.saw_eof);
  const auto* pre = expo.find("vllm:num_preemptions");
  ASSERT_NE(pre, nullptr);
  EXPECT_EQ(pre->type, MetricType::counter);
  EXPECT_EQ(pre->samples.size(), 2U);
  const auto* lat = expo.find("latency_seconds");
  ASSERT_NE(lat, nullptr);
  EXPECT_EQ(lat->unit, "seconds");
  EXPECT_EQ(lat->samples.size(), 5U);
  const auto* build = expo.find("build");
  ASSERT_NE(build, nullptr);
  EXPECT_EQ(build->type, MetricType::info);
  EXPECT_EQ(build->samples[0].timestamp_ms, 1700000000500);
  EXPECT_EQ(expo.families.size(), 3U);
}

TEST(PrometheusParser, ContentAfterEofIsAStrictError) {
  EXPECT_NE(strict_error("a 1\n# EOF\nb 2\n").find("line 3"), std::string::npos);
  ParseOptions lenient;
  lenient.strict = false;
  const auto r = parse_prometheus_text("a 1\n# EOF\nb 2\n", lenient);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->find("b"), nullptr);
  EXPECT_EQ(r->n_skipped_lines, 1U);
}

TEST(PrometheusParser, TrailingCommaAndEmptyLabelSet) {
  const auto expo = parse_ok("x{a=\"1\",} 1\ny{} 2\nz{ a = \"q\" } 3\n");
  EXPECT_EQ(expo.find("x")->samples[0].labels.size(), 1U);
  EXPECT_TRUE(expo.find("y")->samples[0].labels.empty());
  EXPECT_EQ(*expo.find("z")->samples[0].label("a"), "q");
}

TEST(PrometheusParser, VllmFixtureGroupsHistogramsAndCreatedGauges) {
  const auto text = test::read_fixture("prometheus/vllm_v1.txt");
  const auto expo = parse_ok(text);
  EXPECT_EQ(expo.n_skipped_lines, 0U);
  const auto* iter = expo.find("vllm:iteration_tokens_total");
  ASSERT_NE(iter, nullptr);
  EXPECT_EQ(iter->type, MetricType::histogram);
  // 13 buckets + +Inf, then _count and _sum, all in the family whose name ends in _total.
  EXPECT_EQ(iter->samples.size(), 16U);
  size_t n_buckets = 0;
  double previous = -1.0;
  for (const auto& s : iter->samples) {
    if (s.name != "vllm:iteration_tokens_total_bucket") continue;
    ++n_buckets;
    EXPECT_GE(s.value, previous);  // cumulative buckets
    previous = s.value;
    EXPECT_EQ(*s.label("model_name"), "meta-llama/Llama-3.1-8B-Instruct");
  }
  EXPECT_EQ(n_buckets, 14U);
  const auto* created = expo.find("vllm:iteration_tokens_total_created");
  ASSERT_NE(created, nullptr);
  EXPECT_EQ(created->type, MetricType::gauge);
  const auto* info = expo.find("vllm:cache_config_info");
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(*info->samples.at(0).label("num_gpu_blocks"), "27153");
  EXPECT_EQ(*info->samples.at(0).label("num_cpu_blocks"), "None");
}

TEST(PrometheusParser, EngineFixturesParseStrictly) {
  for (const char* name : {"vllm_v1.txt", "sglang.txt", "tgi.txt", "llamacpp.txt"}) {
    const auto result =
        parse_prometheus_text(test::read_fixture(std::string("prometheus/") + name));
    EXPECT_TRUE(result.has_value()) << name << ": " << (result ? "" : result.error().message);
  }
  const auto tgi = parse_ok(test::read_fixture("prometheus/tgi.txt"));
  const auto* fwd = tgi.find("tgi_batch_forward_duration");
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->type, MetricType::summary);
  EXPECT_EQ(fwd->samples.size(), 16U);  // 2 methods x (6 quantiles + sum + count)
}

}  // namespace
}  // namespace kvprof::metrics
