#include "kvprof/metrics/scraper.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <vector>

#include <unistd.h>

#include "kvprof/engines/registry.hpp"
#include "kvprof/util/strings.hpp"
#include "unit/metrics_test_server.hpp"

namespace kvprof::metrics {
namespace {

using kvprof::testing::LoopbackHttpServer;
using kvprof::testing::TestReply;

class TempDir {
 public:
  TempDir() {
    m_path = std::filesystem::temp_directory_path() /
             ("kvprof_scraper_test_" + std::to_string(::getpid()) + "_" +
              std::to_string(s_counter.fetch_add(1)));
    std::filesystem::create_directories(m_path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(m_path, ec);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return m_path; }

 private:
  static inline std::atomic<int> s_counter{0};
  std::filesystem::path m_path;
};

struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  [[nodiscard]] size_t col(std::string_view name) const {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return i;
    }
    ADD_FAILURE() << "no column " << name;
    return 0;
  }
};

Csv read_csv(const std::filesystem::path& path) {
  Csv csv;
  std::ifstream in(path);
  std::string line;
  if (std::getline(in, line)) csv.header = split(line, ',');
  while (std::getline(in, line))
    csv.rows.push_back(split(line, ','));
  return csv;
}

// Collects warnings from the scraper thread.
struct Warnings {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& w) {
      std::lock_guard lock(mutex);
      lines.push_back(w);
    };
  }
  size_t count() {
    std::lock_guard lock(mutex);
    return lines.size();
  }
};

TEST(MetricsUrl, DerivedFromOpenAiBaseUrl) {
  EXPECT_EQ(metrics_url_from_base("http://host:8000/v1").value(), "http://host:8000/metrics");
  EXPECT_EQ(metrics_url_from_base("http://host:8000/v1/").value(), "http://host:8000/metrics");
  EXPECT_EQ(metrics_url_from_base("http://host:8000").value(), "http://host:8000/metrics");
  EXPECT_EQ(metrics_url_from_base("https://h/v1/chat/completions").value(), "https://h/metrics");
  EXPECT_EQ(metrics_url_from_base("http://h:1/proxy/v1?x=1").value(), "http://h:1/proxy/metrics");
  EXPECT_EQ(metrics_url_from_base("http://h:9/metrics").value(), "http://h:9/metrics");
  EXPECT_EQ(metrics_url_from_base("HTTP://h").value(), "http://h/metrics");
  EXPECT_FALSE(metrics_url_from_base("host:8000/v1").has_value());
  EXPECT_FALSE(metrics_url_from_base("ftp://h/v1").has_value());
  EXPECT_FALSE(metrics_url_from_base("http:///v1").has_value());
}

TEST(MetricsScraper, WritesRowsFromAChangingEndpoint) {
  std::atomic<int> n_served{0};
  LoopbackHttpServer server([&](const std::string& path) {
    if (path != "/metrics") return TestReply{404, "", "text/plain", 0};
    const int n = n_served.fetch_add(1);
    // Usage climbs then falls; running follows it; waiting is never reported.
    const double usage = n < 3 ? 0.1 * (n + 1) : 0.05;
    std::string body = "# TYPE vllm:kv_cache_usage_perc gauge\n";
    body +=
        "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} " + std::to_string(usage) + "\n";
    body +=
        "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} " + std::to_string(n % 4) + "\n";
    body += "this line is broken {\n";
    return TestReply{200, body, "text/plain; version=0.0.4", 0};
  });
  TempDir dir;
  Warnings warnings;
  ScraperOptions options;
  options.read_snapshot = &engines::read_metrics;
  options.metrics_url = server.url("/metrics");
  options.interval_ms = 20;
  options.csv_path = dir.path() / "metrics_trace.csv";
  options.on_warning = warnings.sink();
  auto scraper = MetricsScraper::start(options);
  ASSERT_TRUE(scraper.has_value()) << scraper.error().message;
  ASSERT_TRUE((*scraper)->wait_for_scrapes(6, 5000));
  // Rows are on disk (flushed) before stop().
  EXPECT_GE(read_csv(options.csv_path).rows.size(), 6U);
  (*scraper)->stop();

  const Csv csv = read_csv(options.csv_path);
  EXPECT_EQ(csv.header, split(trace_csv_header(), ','));
  ASSERT_GE(csv.rows.size(), 6U);
  int64_t previous_mono = 0;
  int64_t previous_wall = 0;
  for (const auto& row : csv.rows) {
    ASSERT_EQ(row.size(), csv.header.size());
    EXPECT_EQ(row[csv.col("status")], "ok");
    EXPECT_EQ(row[csv.col("engine")], "vllm");
    EXPECT_EQ(row[csv.col("num_requests_waiting")], "");
    EXPECT_EQ(row[csv.col("skipped_lines")], "1");
    const int64_t mono = std::stoll(row[csv.col("mono_ns")]);
    const int64_t wall = std::stoll(row[csv.col("wall_ms")]);
    EXPECT_GT(mono, previous_mono);
    EXPECT_GE(wall, previous_wall);
    previous_mono = mono;
    previous_wall = wall;
  }
  EXPECT_DOUBLE_EQ(std::stod(csv.rows[0][csv.col("kv_cache_usage")]), 0.1);
  EXPECT_DOUBLE_EQ(std::stod(csv.rows[2][csv.col("kv_cache_usage")]), 0.3);
  EXPECT_DOUBLE_EQ(std::stod(csv.rows[3][csv.col("kv_cache_usage")]), 0.05);

  const auto peaks = (*scraper)->peaks();
  EXPECT_DOUBLE_EQ(peaks.kv_cache_usage.value(), 0.3);
  EXPECT_GT(peaks.kv_cache_usage_mono_ns, 0);
  EXPECT_EQ(peaks.num_requests_running.value(), 3.0);
  EXPECT_FALSE(peaks.num_requests_waiting.has_value());
  const auto last = (*scraper)->last_ok();
  ASSERT_TRUE(last.has_value());
  EXPECT_DOUBLE_EQ(last->snapshot.kv_cache_usage.value(), 0.05);
  const auto stats = (*scraper)->stats();
  EXPECT_EQ(stats.n_scrapes, csv.rows.size());
  EXPECT_EQ(stats.n_failed, 0U);
  EXPECT_EQ(stats.n_skipped_lines, csv.rows.size());
  EXPECT_EQ(warnings.count(), 0U);
}

TEST(MetricsScraper, SteadyIntervalAndPromptStop) {
  LoopbackHttpServer server([](const std::string&) {
    return TestReply{200, "vllm:num_requests_running 1\n", "text/plain", 0};
  });
  ScraperOptions options;
  options.read_snapshot = &engines::read_metrics;
  options.metrics_url = server.url("/metrics");
  options.interval_ms = 50;
  options.on_warning = [](const std::string&) {};
  auto scraper = MetricsScraper::start(options);
  ASSERT_TRUE(scraper.has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(520));
  const auto t0 = std::chrono::steady_clock::now();
  (*scraper)->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(300));
  const auto n = (*scraper)->stats().n_scrapes;
  // About 11 ticks in 520 ms at 50 ms; never a burst beyond the schedule.
  EXPECT_GE(n, 7U);
  EXPECT_LE(n, 12U);
}

TEST(MetricsScraper, NotFoundIsOneWarningAndSlowerRetries) {
  LoopbackHttpServer server([](const std::string&) {
    return TestReply{404, "404 page not found", "text/plain", 0};
  });
  TempDir dir;
  Warnings warnings;
  ScraperOptions options;
  options.read_snapshot = &engines::read_metrics;
  options.metrics_url = server.url("/metrics");
  options.interval_ms = 10;
  options.missing_interval_ms = 100;
  options.csv_path = dir.path() / "metrics_trace.csv";
  options.on_warning = warnings.sink();
  auto scraper = MetricsScraper::start(options);
  ASSERT_TRUE(scraper.has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  (*scraper)->stop();
  const auto stats = (*scraper)->stats();
  // At 10 ms there would be ~45 scrapes; the missing endpoint is polled every 100 ms.
  EXPECT_GE(stats.n_scrapes, 3U);
  EXPECT_LE(stats.n_scrapes, 7U);
  EXPECT_EQ(stats.n_ok, 0U);
  EXPECT_EQ(warnings.count(), 1U);
  EXPECT_NE(warnings.lines.at(0).find("404"), std::string::npos) << warnings.lines.at(0);
  EXPECT_FALSE((*scraper)->last_ok().has_value());
  EXPECT_FALSE((*scraper)->peaks().kv_cache_usage.has_value());
  const Csv csv = read_csv(options.csv_path);
  ASSERT_EQ(csv.rows.size(), stats.n_scrapes);
  for (const auto& row : csv.rows) {
    ASSERT_EQ(row.size(), csv.header.size());
    EXPECT_EQ(row[csv.col("status")], "http_404");
    EXPECT_EQ(row[csv.col("kv_cache_usage")], "");
    EXPECT_EQ(row[csv.col("engine")], "");
  }
}

TEST(MetricsScraper, AMetricsPageOfGarbageOrLiesIsOneWarningEach) {
  LoopbackHttpServer server([](const std::string&) {
    return TestReply{200, "<html>\n<body>not metrics</body>\n</html>\n", "text/html", 0};
  });
  Warnings warnings;
  ScraperOptions options;
  options.read_snapshot = &engines::read_metrics;
  options.metrics_url = server.url("/metrics");
  options.interval_ms = 10;
  options.on_warning = warnings.sink();
  auto scraper = MetricsScraper::start(options);
  ASSERT_TRUE(scraper.has_value());
  ASSERT_TRUE((*scraper)->wait_for_scrapes(3, 3000));
  (*scraper)->stop();
  ASSERT_EQ(warnings.count(), 1U);
  EXPECT_NE(warnings.lines.at(0).find("none of its 3 lines is Prometheus text"), std::string::npos)
      << warnings.lines.at(0);

  LoopbackHttpServer liar([](const std::string&) {
    return TestReply{200, "vllm:kv_cache_usage_perc -3.5\nvllm:num_requests_running 1\n",
                     "text/plain", 0};
  });
  Warnings lies;
  options.metrics_url = liar.url("/metrics");
  options.on_warning = lies.sink();
  scraper = MetricsScraper::start(options);
  ASSERT_TRUE(scraper.has_value());
  ASSERT_TRUE((*scraper)->wait_for_scrapes(3, 3000));
  (*scraper)->stop();
  ASSERT_EQ(lies.count(), 1U);
  EXPECT_NE(lies.lines.at(0).find("reported 1 value(s) no engine can have"), std::string::npos)
      << lies.lines.at(0);
  EXPECT_FALSE((*scraper)->peaks().kv_cache_usage.has_value());
}

TEST(MetricsScraper, NothingListeningIsAWarningNotAFailure) {
  const auto port = kvprof::testing::unused_loopback_port();
  Warnings warnings;
  ScraperOptions options;
  options.read_snapshot = &engines::read_metrics;
  options.metrics_url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  options.interval_ms = 10;
  options.missing_interval_ms = 50;
  options.on_warning = warnings.sink();
  auto scraper = MetricsScraper::start(options);
  ASSERT_TRUE(scraper.has_value());
  ASSERT_TRUE((*scraper)->wait_for_scrapes(3, 3000));
  (*scraper)->stop();
  EXPECT_EQ(warnings.count(), 1U);
  EXPECT_GE((*scraper)->stats().n_failed, 3U);
  EXPECT_FALSE((*scraper)->stats().last_error.empty());
}

TEST(MetricsScraper, SharedStopFlagEndsTheThread) {
  LoopbackHttpServer server([](const std::string&) {
    return TestReply{200, "vllm:num_requests_running 1\n", "text/plain", 0};
  });
  std::atomic<bool> stop_flag{false};
  ScraperOptions options;
  options.read_snapshot = &engines::read_metrics;
  options.metrics_url = server.url("/metrics");
  options.interval_ms = 10;
  options.stop_flag = &stop_flag;
  auto scraper = MetricsScraper::start(options);
  ASSERT_TRUE(scraper.has_value());
  ASSERT_TRUE((*scraper)->wait_for_scrapes(2, 3000));
  stop_flag.store(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto n = (*scraper)->stats().n_scrapes;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ((*scraper)->stats().n_scrapes, n);  // no scrapes after the flag
  (*scraper)->stop();
}

TEST(MetricsScraper, LlamacppSlotsArePolledToo) {
  LoopbackHttpServer server([](const std::string& path) {
    if (path == "/slots") {
      return TestReply{
          200,
          R"([{"id":0,"n_ctx":4096,"is_processing":true},{"id":1,"n_ctx":4096,"is_processing":false}])",
          "application/json", 0};
    }
    return TestReply{200, "llamacpp:requests_processing 1\nllamacpp:kv_cache_usage_ratio 0.5\n",
                     "text/plain", 0};
  });
  ScraperOptions options;
  options.read_snapshot = &engines::read_metrics;
  options.metrics_url = server.url("/metrics");
  options.interval_ms = 20;
  auto scraper = MetricsScraper::start(options);
  ASSERT_TRUE(scraper.has_value());
  ASSERT_TRUE((*scraper)->wait_for_scrapes(2, 3000));
  (*scraper)->stop();
  const auto last = (*scraper)->last_ok();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->snapshot.engine, engines::Engine::llamacpp);
  EXPECT_EQ(last->snapshot.slots_total.value(), 2.0);
  EXPECT_EQ(last->snapshot.slots_busy.value(), 1.0);
}

TEST(MetricsScraper, UnwritableCsvIsAnIoError) {
  ScraperOptions options;
  options.read_snapshot = &engines::read_metrics;
  options.metrics_url = "http://127.0.0.1:1/metrics";
  options.csv_path = "/nonexistent-dir-kvprof/metrics_trace.csv";
  const auto scraper = MetricsScraper::start(options);
  ASSERT_FALSE(scraper.has_value());
  EXPECT_EQ(scraper.error().kind, ErrorKind::io);
}

}  // namespace
}  // namespace kvprof::metrics
