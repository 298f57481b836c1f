// MetricsScraper's thread: steady ticks (missed ticks are skipped, never bunched), one GET per
// tick, a lenient parse, one flushed CSV row per scrape, warnings printed once per kind.
#include "kvprof/metrics/scraper.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "kvprof/util/clock.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::metrics {
namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t to_ns(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

void raise_peak(std::optional<double>& peak, const std::optional<double>& value) {
  if (value && (!peak || *value > *peak)) peak = value;
}

// "/metrics" at the end of `metrics_url` replaced by "/slots"; empty when it does not end so.
std::string slots_url_for(std::string_view metrics_url) {
  constexpr std::string_view k_metrics = "/metrics";
  if (!metrics_url.ends_with(k_metrics)) return {};
  return std::string(metrics_url.substr(0, metrics_url.size() - k_metrics.size())) + "/slots";
}

}  // namespace

MetricsScraper::MetricsScraper(ScraperOptions options) : m_options(std::move(options)) {
  if (m_options.poll_llamacpp_slots) m_slots_url = slots_url_for(m_options.metrics_url);
}

Expected<std::unique_ptr<MetricsScraper>> MetricsScraper::start(ScraperOptions options) {
  if (options.metrics_url.empty()) return fail(ErrorKind::input, "metrics scraper: empty URL");
  if (!options.read_snapshot) {
    return fail(ErrorKind::internal, "metrics scraper: no reader of the engine's metrics");
  }
  if (options.interval_ms == 0 || options.missing_interval_ms == 0) {
    return fail(ErrorKind::input, "metrics scraper: the interval must be at least 1 ms");
  }
  std::unique_ptr<MetricsScraper> scraper(new MetricsScraper(std::move(options)));
  if (!scraper->m_options.csv_path.empty()) {
    const auto& path = scraper->m_options.csv_path;
    scraper->m_csv = std::fopen(path.c_str(), "w");
    if (scraper->m_csv == nullptr) {
      return fail(ErrorKind::io,
                  fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
    }
    const std::string header = trace_csv_header() + "\n";
    if (std::fwrite(header.data(), 1, header.size(), scraper->m_csv) != header.size() ||
        std::fflush(scraper->m_csv) != 0) {
      return fail(ErrorKind::io,
                  fmt::format("cannot write '{}': {}", path.string(), std::strerror(errno)));
    }
    scraper->m_csv_committed_bytes = static_cast<long>(header.size());
  }
  scraper->m_thread = std::thread([s = scraper.get()] { s->run(); });
  return scraper;
}

MetricsScraper::~MetricsScraper() {
  stop();
}

void MetricsScraper::stop() {
  {
    std::lock_guard lock(m_mutex);
    m_stop.store(true);
  }
  m_cv.notify_all();
  if (m_thread.joinable()) m_thread.join();
  if (m_csv != nullptr) {
    std::fclose(m_csv);
    m_csv = nullptr;
  }
}

bool MetricsScraper::stopping() const {
  return m_stop.load() || (m_options.stop_flag != nullptr && m_options.stop_flag->load());
}

std::optional<ScrapeRecord> MetricsScraper::last_ok() const {
  std::lock_guard lock(m_mutex);
  return m_last_ok;
}

MetricsPeaks MetricsScraper::peaks() const {
  std::lock_guard lock(m_mutex);
  return m_peaks;
}

ScraperStats MetricsScraper::stats() const {
  std::lock_guard lock(m_mutex);
  return m_stats;
}

bool MetricsScraper::wait_for_scrapes(uint64_t n_scrapes, uint32_t timeout_ms) const {
  std::unique_lock lock(m_mutex);
  m_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                [&] { return m_stats.n_scrapes >= n_scrapes || m_thread_done; });
  return m_stats.n_scrapes >= n_scrapes;
}

void MetricsScraper::warn(const std::string& message) {
  {
    std::lock_guard lock(m_mutex);
    ++m_stats.n_warnings;
  }
  if (m_options.on_warning) {
    m_options.on_warning(message);
  } else {
    fmt::print(stderr, "kvprof: warning: {}\n", message);
  }
}

std::optional<ScrapeRecord> MetricsScraper::scrape_now(uint32_t timeout_ms) {
  std::unique_lock lock(m_mutex);
  const uint64_t ticket = ++m_demand_asked;
  m_cv.notify_all();
  m_cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                [&] { return m_demand_served >= ticket || m_thread_done; });
  if (m_demand_served < ticket) return std::nullopt;
  return m_last_record;
}

void MetricsScraper::run() {
  auto next = SteadyClock::now();
  while (!stopping()) {
    const bool tick_due = SteadyClock::now() >= next;
    uint64_t ticket = 0;
    {
      std::lock_guard lock(m_mutex);
      ticket = m_demand_asked;
    }
    const ScrapeRecord rec = scrape_once();
    if (stopping()) break;  // a scrape cut short by stop() is not a row
    record(rec);
    {
      std::lock_guard lock(m_mutex);
      m_demand_served = ticket;
      m_last_record = rec;
    }
    m_cv.notify_all();

    // An on-demand scrape between ticks leaves the tick schedule as it was.
    if (tick_due) {
      const auto interval = std::chrono::milliseconds(m_missing ? m_options.missing_interval_ms
                                                                : m_options.interval_ms);
      next += interval;
      const auto now = SteadyClock::now();
      if (next <= now) {
        // Overran: skip the missed ticks rather than firing them back to back.
        const auto behind = now - next;
        next += interval * (behind / interval + 1);
      }
    }
    // Wait in short slices so the shared stop flag is seen promptly.
    std::unique_lock lock(m_mutex);
    while (!stopping() && m_demand_asked == m_demand_served) {
      const auto slice_end = std::min(next, SteadyClock::now() + std::chrono::milliseconds(20));
      m_cv.wait_until(lock, slice_end,
                      [&] { return m_stop.load() || m_demand_asked != m_demand_served; });
      if (SteadyClock::now() >= next) break;
    }
  }
  {
    std::lock_guard lock(m_mutex);
    m_thread_done = true;
  }
  m_cv.notify_all();
}

ScrapeRecord MetricsScraper::scrape_once() {
  client::HttpGetOptions http_options;
  http_options.timeout_ms = m_options.timeout_ms;
  http_options.connect_timeout_ms = std::min<uint32_t>(m_options.timeout_ms, 1000);
  http_options.max_body_bytes = m_options.max_body_bytes;
  http_options.cancel = &m_stop;

  ScrapeRecord rec;
  const auto t0 = SteadyClock::now();
  client::HttpGetFailure why = client::HttpGetFailure::none;
  auto response = m_http.get(m_options.metrics_url, http_options, &why);
  const auto t1 = SteadyClock::now();
  rec.mono_ns = to_ns(t1);
  rec.wall_ms = unix_now_ms();
  rec.scrape_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();

  bool missing = false;
  std::string error;
  if (!response) {
    error = response.error().message;
    switch (why) {
      case client::HttpGetFailure::connect:
        rec.status = ScrapeStatus::unreachable;
        missing = true;
        break;
      case client::HttpGetFailure::timeout:
        rec.status = ScrapeStatus::timeout;
        break;
      case client::HttpGetFailure::too_large:
        rec.status = ScrapeStatus::too_large;
        break;
      default:
        rec.status = ScrapeStatus::error;
        break;
    }
  } else if (response->status != 200) {
    rec.status = ScrapeStatus::http_error;
    rec.http_status = response->status;
    missing = response->status == 404;
    error = fmt::format("GET {}: HTTP {}", m_options.metrics_url, response->status);
    // llama-server without --metrics (404 or 501) may still serve /slots: the one source left.
    MetricsSnapshot from_slots;
    from_slots.engine = engines::Engine::llamacpp;
    if ((response->status == 404 || response->status == 501) && !m_slots_url.empty() &&
        poll_slots(from_slots)) {
      if (!m_warned_slots_only && !stopping()) {
        m_warned_slots_only = true;
        warn(fmt::format("{} answered HTTP {}; reading slots and KV usage from {}",
                         m_options.metrics_url, response->status, m_slots_url));
      }
      rec.status = ScrapeStatus::ok;
      rec.snapshot = from_slots;
      missing = false;
      error.clear();
    }
  } else {
    rec.http_status = response->status;
    ParseOptions parse_options;
    parse_options.strict = false;
    auto exposition = parse_prometheus_text(response->body, parse_options);
    if (!exposition) {
      rec.status = ScrapeStatus::parse_error;
      error = fmt::format("{}: {}", m_options.metrics_url, exposition.error().message);
    } else {
      rec.status = ScrapeStatus::ok;
      rec.skipped_lines = exposition->n_skipped_lines;
      rec.snapshot = m_options.read_snapshot(*exposition);
      if (exposition->families.empty() && exposition->n_skipped_lines > 0 && !m_warned_garbage &&
          !stopping()) {
        m_warned_garbage = true;
        warn(
            fmt::format("{} answered, but none of its {} lines is Prometheus text kvprof can "
                        "read; KV cache and queue columns stay empty",
                        m_options.metrics_url, exposition->n_skipped_lines));
      }
      if (const size_t bad = count_impossible_values(*exposition);
          bad > 0 && !m_warned_impossible && !stopping()) {
        m_warned_impossible = true;
        warn(
            fmt::format("{} reported {} value(s) no engine can have (a negative count or size, a "
                        "KV share over 100%); they are left out",
                        m_options.metrics_url, bad));
      }
      if (rec.snapshot.engine == engines::Engine::llamacpp && !m_slots_url.empty())
        poll_slots(rec.snapshot);
    }
  }

  if (missing && !m_warned_missing && !stopping()) {
    m_warned_missing = true;
    warn(
        fmt::format("no metrics endpoint at {} ({}); KV cache and queue columns stay empty; "
                    "retrying every {} ms",
                    m_options.metrics_url, error, m_options.missing_interval_ms));
  } else if (!missing && rec.status != ScrapeStatus::ok && !m_warned_failure && !stopping()) {
    m_warned_failure = true;
    warn(fmt::format("metrics scrape failed ({}); will keep trying", error));
  }
  m_missing = missing;
  if (!error.empty()) {
    std::lock_guard lock(m_mutex);
    m_stats.last_error = error;
  }
  return rec;
}

bool MetricsScraper::poll_slots(MetricsSnapshot& snapshot) {
  client::HttpGetOptions http_options;
  http_options.timeout_ms = m_options.timeout_ms;
  http_options.connect_timeout_ms = std::min<uint32_t>(m_options.timeout_ms, 1000);
  http_options.max_body_bytes = m_options.max_body_bytes;
  http_options.cancel = &m_stop;
  auto response = m_http.get(m_slots_url, http_options);
  if (!response || response->status != 200) {
    // Served only with --slots; a server without it is not asked again.
    if (response) m_slots_url.clear();
    return false;
  }
  const auto slots = parse_llamacpp_slots(response->body);
  if (!slots) {
    m_slots_url.clear();
    return false;
  }
  snapshot.slots_total = static_cast<double>(slots->slots_total);
  snapshot.slots_busy = static_cast<double>(slots->slots_busy);
  // The cells of the slots where /metrics does not say: what the in-flight requests' tokens are
  // measured against when /slots has no per-slot token count either (b5441 - b9275). Slots that
  // share one cache each state all of it.
  const uint64_t cells =
      m_options.slots_share_one_cache ? slots->n_ctx_max_tokens : slots->n_ctx_total_tokens;
  if (!snapshot.kv_cache_capacity_tokens && cells > 0) snapshot.kv_cache_capacity_tokens = cells;
  // KV usage from /slots where /metrics has no KV gauge (llama.cpp dropped them).
  if (!snapshot.kv_cache_usage && slots->kv_used_tokens && cells > 0) {
    snapshot.kv_cache_used_tokens = static_cast<double>(*slots->kv_used_tokens);
    snapshot.kv_cache_capacity_tokens = cells;
    snapshot.kv_cache_usage =
        static_cast<double>(*slots->kv_used_tokens) / static_cast<double>(cells);
    snapshot.kv_cache_source = KvSource::slots;
  }
  return true;
}

std::optional<Error> MetricsScraper::write_error() const {
  std::lock_guard lock(m_mutex);
  return m_write_error;
}

void MetricsScraper::record(const ScrapeRecord& rec) {
  if (m_csv != nullptr) {
    std::string row = format_trace_row(rec);
    row += '\n';
    if (std::fwrite(row.data(), 1, row.size(), m_csv) != row.size() || std::fflush(m_csv) != 0) {
      const int err = errno;
      // Keep the file readable (no partial row), stop writing it, and say why once.
      if (::ftruncate(::fileno(m_csv), m_csv_committed_bytes) != 0) {
        // Nothing more can be done; the error below is what matters.
      }
      std::fclose(m_csv);
      m_csv = nullptr;
      Error error{ErrorKind::io, fmt::format("cannot write '{}': {}", m_options.csv_path.string(),
                                             std::strerror(err))};
      {
        std::lock_guard lock(m_mutex);
        m_write_error = error;
      }
      warn(error.message);
    } else {
      m_csv_committed_bytes += static_cast<long>(row.size());
    }
  }
  {
    std::lock_guard lock(m_mutex);
    ++m_stats.n_scrapes;
    if (rec.status == ScrapeStatus::ok) {
      ++m_stats.n_ok;
      m_stats.n_skipped_lines += rec.skipped_lines.value_or(0);
      const MetricsSnapshot& s = rec.snapshot;
      if (s.kv_cache_usage &&
          (!m_peaks.kv_cache_usage || *s.kv_cache_usage > *m_peaks.kv_cache_usage)) {
        m_peaks.kv_cache_usage = s.kv_cache_usage;
        m_peaks.kv_cache_usage_mono_ns = rec.mono_ns;
      }
      raise_peak(m_peaks.kv_cache_used_tokens, s.kv_cache_used_tokens);
      raise_peak(m_peaks.num_requests_running, s.num_requests_running);
      raise_peak(m_peaks.num_requests_waiting, s.num_requests_waiting);
      raise_peak(m_peaks.num_preemptions_total, s.num_preemptions_total);
      raise_peak(m_peaks.slots_busy, s.slots_busy);
      m_last_ok = rec;
    } else {
      ++m_stats.n_failed;
    }
  }
  if (m_options.on_record) m_options.on_record(rec);
  m_cv.notify_all();
}

Expected<std::string> metrics_url_from_base(std::string_view base_url) {
  const std::string url = trim(base_url);
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) {
    return fail(ErrorKind::input, fmt::format("not an http(s) URL: '{}'", url));
  }
  const std::string scheme = to_lower(std::string_view(url).substr(0, scheme_end));
  if (scheme != "http" && scheme != "https") {
    return fail(ErrorKind::input, fmt::format("not an http(s) URL: '{}'", url));
  }
  std::string_view rest = std::string_view(url).substr(scheme_end + 3);
  rest = rest.substr(0, rest.find_first_of("?#"));
  const size_t path_start = rest.find('/');
  const std::string_view authority = rest.substr(0, path_start);
  if (authority.empty()) return fail(ErrorKind::input, fmt::format("no host in URL '{}'", url));
  std::string_view path =
      path_start == std::string_view::npos ? std::string_view{} : rest.substr(path_start);
  while (path.ends_with('/'))
    path.remove_suffix(1);
  if (path.ends_with("/metrics")) return fmt::format("{}://{}{}", scheme, authority, path);
  for (const std::string_view endpoint : {"/chat/completions", "/completions", "/models"}) {
    if (path.ends_with(endpoint)) {
      path.remove_suffix(endpoint.size());
      break;
    }
  }
  if (path.ends_with("/v1")) path.remove_suffix(3);
  return fmt::format("{}://{}{}/metrics", scheme, authority, path);
}

}  // namespace kvprof::metrics
