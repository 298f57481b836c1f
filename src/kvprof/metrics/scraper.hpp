// MetricsScraper: polls a server's Prometheus /metrics on its own thread at a steady interval
// (and at once when asked, scrape_now), writes every scrape to metrics_trace.csv at once
// (flushed), and keeps the last snapshot and the peaks for the orchestrator. A missing endpoint
// is a warning, never a failure.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "kvprof/client/http_get.hpp"
#include "kvprof/metrics/trace_csv.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::metrics {

struct ScraperOptions {
  std::string metrics_url;  // e.g. metrics_url_from_base("http://host:8000/v1")
  // Reads the engine's snapshot out of a scrape: engines::read_metrics (required).
  std::function<MetricsSnapshot(const Exposition&)> read_snapshot;
  uint32_t interval_ms = 100;           // between scrape starts
  uint32_t missing_interval_ms = 1000;  // while /metrics answers 404 or refuses connections
  uint32_t timeout_ms = 2000;           // one scrape, whole request
  uint64_t max_body_bytes = 32ULL << 20;
  std::filesystem::path csv_path;   // metrics_trace.csv; empty: no file
  bool poll_llamacpp_slots = true;  // also GET /slots when the server is llama.cpp
  // The slots share one KV cache (llama.cpp -kvu): each slot's n_ctx is the whole cache, so the
  // cells are one slot's n_ctx, not their sum.
  bool slots_share_one_cache = false;
  const std::atomic<bool>* stop_flag =
      nullptr;  // shared "stop": the thread ends when it turns true
  // Receives each warning (one line, no prefix); default: "kvprof: warning: ..." on stderr.
  std::function<void(const std::string&)> on_warning;
  // Called on the scraper thread with every scrape record, after it is written; must be quick.
  std::function<void(const ScrapeRecord&)> on_record;
};

// The highest values seen over the successful scrapes; a field no scrape reported stays absent.
struct MetricsPeaks {
  std::optional<double> kv_cache_usage;
  int64_t kv_cache_usage_mono_ns = 0;  // when the peak usage was scraped
  std::optional<double> kv_cache_used_tokens;
  std::optional<double> num_requests_running;
  std::optional<double> num_requests_waiting;
  std::optional<double> num_preemptions_total;
  std::optional<double> slots_busy;
};

struct ScraperStats {
  uint64_t n_scrapes = 0;  // rows written (or that would be, without a CSV)
  uint64_t n_ok = 0;
  uint64_t n_failed = 0;
  uint64_t n_skipped_lines = 0;  // malformed lines skipped over all scrapes
  uint64_t n_warnings = 0;
  std::string last_error;  // one line; empty while every scrape succeeded
};

class MetricsScraper {
 public:
  // Opens the CSV (writing its header) and starts the thread; an io error when the CSV cannot be
  // created, an input error for an empty URL or a zero interval.
  static Expected<std::unique_ptr<MetricsScraper>> start(ScraperOptions options);

  ~MetricsScraper();
  MetricsScraper(const MetricsScraper&) = delete;
  MetricsScraper& operator=(const MetricsScraper&) = delete;

  // Ends the thread (an in-flight request is cancelled) and joins it; closes the CSV. Idempotent.
  void stop();

  // The last successful scrape, or nullopt before the first.
  [[nodiscard]] std::optional<ScrapeRecord> last_ok() const;
  [[nodiscard]] MetricsPeaks peaks() const;
  [[nodiscard]] ScraperStats stats() const;
  // How long one scrape may take (ScraperOptions::timeout_ms): a wait for a scrape to come back
  // is this and a little more.
  [[nodiscard]] uint32_t scrape_timeout_ms() const { return m_options.timeout_ms; }

  // The error that stopped metrics_trace.csv from being written (e.g. a full disk), if any;
  // scraping goes on in memory.
  [[nodiscard]] std::optional<Error> write_error() const;

  // Blocks until at least `n_scrapes` scrapes (of any status) are done, the thread ended, or
  // `timeout_ms` passed; returns whether the count was reached.
  bool wait_for_scrapes(uint64_t n_scrapes, uint32_t timeout_ms) const;

  // Asks the thread for a scrape now (the steady ticks go on as before) and waits for it: the
  // record of a scrape that started after the call (of any status), or nullopt when none ended
  // within `timeout_ms` or the thread has ended.
  std::optional<ScrapeRecord> scrape_now(uint32_t timeout_ms);

 private:
  explicit MetricsScraper(ScraperOptions options);
  void run();
  ScrapeRecord scrape_once();
  // GETs /slots into `snapshot` (slot counts; KV usage when /metrics had none); false when
  // the server has no usable /slots (it is then not asked again).
  bool poll_slots(MetricsSnapshot& snapshot);
  void record(const ScrapeRecord& rec);
  void warn(const std::string& message);
  [[nodiscard]] bool stopping() const;

  ScraperOptions m_options;
  std::string m_slots_url;  // empty when /slots is not derivable or not served
  client::HttpGetter m_http;
  std::FILE* m_csv = nullptr;
  long m_csv_committed_bytes = 0;  // thread-only: CSV size after the last whole row
  std::thread m_thread;
  std::atomic<bool> m_stop{false};
  bool m_missing = false;  // thread-only: the endpoint is missing, poll at missing_interval_ms
  bool m_warned_missing = false;
  bool m_warned_failure = false;
  bool m_warned_garbage = false;     // a 200 whose body held no Prometheus line
  bool m_warned_impossible = false;  // negative counts or a KV share over 100%
  bool m_warned_slots_only = false;

  mutable std::mutex m_mutex;
  mutable std::condition_variable m_cv;
  std::optional<ScrapeRecord> m_last_ok;
  MetricsPeaks m_peaks;
  ScraperStats m_stats;
  bool m_thread_done = false;
  std::optional<Error> m_write_error;
  uint64_t m_demand_asked = 0;   // scrape_now calls so far
  uint64_t m_demand_served = 0;  // of them, those a finished scrape started after
  std::optional<ScrapeRecord> m_last_record;
};

// Derives the /metrics URL from an OpenAI base URL: "http://host:8000/v1" and
// "http://host:8000/v1/chat/completions" -> "http://host:8000/metrics"; a URL already ending in
// /metrics is kept. An input error when the URL is not http(s)://host...
Expected<std::string> metrics_url_from_base(std::string_view base_url);

}  // namespace kvprof::metrics
