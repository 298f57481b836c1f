// Per-condition server figures and their sample counts (see condition_metrics.hpp).
#include "kvprof/profile/condition_metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "kvprof/profile/summary.hpp"
#include "kvprof/util/json_text.hpp"

namespace kvprof::profile {

using nlohmann::json;

namespace {

uint64_t round_up(uint64_t tokens, uint64_t block) {
  return block == 0 ? tokens : (tokens + block - 1) / block * block;
}

bool has(const std::vector<std::string>& list, std::string_view name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

std::optional<uint64_t> fewest_memory_samples(const ConditionReport& c) {
  std::optional<uint64_t> fewest;
  for (const auto& g : c.memory)
    fewest = std::min(fewest.value_or(g.n_samples), g.n_samples);
  return fewest;
}

}  // namespace

uint32_t auto_scrape_interval_ms(double min_condition_s) {
  if (!(min_condition_s > 0)) return k_scrape_floor_ms;
  const double ms = min_condition_s * 1000.0 / k_ticks_per_min_condition;
  return static_cast<uint32_t>(std::clamp(std::floor(ms), static_cast<double>(k_scrape_floor_ms),
                                          static_cast<double>(k_scrape_ceiling_ms)));
}

ScrapePlan scrape_plan_for(uint32_t configured_interval_ms, double min_condition_s) {
  ScrapePlan plan;
  plan.automatic = configured_interval_ms == 0;
  plan.interval_ms =
      plan.automatic ? auto_scrape_interval_ms(min_condition_s) : configured_interval_ms;
  plan.min_condition_s = min_condition_s;
  return plan;
}

json scrape_plan_json(const ScrapePlan& plan) {
  return {{"metrics_interval_ms", plan.interval_ms},
          {"metrics_interval_mode", plan.automatic ? "auto" : "fixed"},
          {"min_condition_s", plan.min_condition_s},
          {"scrapes_at_condition_bounds", true},
          {"min_samples", k_min_condition_samples}};
}

void KvAccounting::begin_condition() {
  m_conditions.emplace_back();
}

void KvAccounting::add(const client::RequestRecord& r, uint32_t shared_prefix_tokens) {
  if (m_conditions.empty() || r.first_token_ns == client::k_no_time) return;
  const uint64_t prompt =
      r.usage && r.usage->prompt_tokens > 0 ? r.usage->prompt_tokens : uint64_t{r.input_len};
  RequestKv kv;
  kv.shared_prefix_tokens = shared_prefix_tokens;
  kv.end_ns = r.end_ns == client::k_no_time ? r.first_token_ns : r.end_ns;
  if (r.chunks.empty()) {
    // No token times: the whole completion from the first token on (an upper bound).
    kv.steps.push_back({r.first_token_ns, prompt + std::max<uint64_t>(1, r.completion_tokens())});
  } else {
    uint64_t generated = 0;
    for (const auto& chunk : r.chunks) {
      generated += chunk.n_tokens;
      const int64_t t = std::max(chunk.t_ns, r.first_token_ns);
      if (!kv.steps.empty() && kv.steps.back().t_ns == t) {
        kv.steps.back().tokens = prompt + generated;
      } else {
        kv.steps.push_back({t, prompt + generated});
      }
    }
  }
  kv.end_ns = std::max(kv.end_ns, kv.steps.back().t_ns);
  m_conditions.back().push_back(std::move(kv));
}

size_t KvAccounting::n_requests(size_t index) const {
  return index < m_conditions.size() ? m_conditions[index].size() : 0;
}

uint32_t KvAccounting::shared_prefix_tokens(size_t index) const {
  uint32_t longest = 0;
  if (index < m_conditions.size()) {
    for (const auto& r : m_conditions[index])
      longest = std::max(longest, r.shared_prefix_tokens);
  }
  return longest;
}

std::optional<uint64_t> KvAccounting::peak_tokens(size_t index, uint64_t block_size_tokens,
                                                  bool share_prefix) const {
  if (index >= m_conditions.size() || m_conditions[index].empty()) return std::nullopt;
  // The shared prefix's whole blocks (those a prefix cache can share), held once.
  uint64_t shared = 0;
  if (share_prefix) {
    shared = shared_prefix_tokens(index);
    if (block_size_tokens > 0) shared = shared / block_size_tokens * block_size_tokens;
  }
  // Each request as changes of the tokens it holds (beyond the shared part) and of the number of
  // requests holding the shared part; a release sorts before a gain at the same time (a slot
  // freed and taken again is not two requests at once).
  struct Change {
    int64_t t_ns;
    int holders;
    int64_t tokens;
    auto operator<=>(const Change&) const = default;
  };
  std::vector<Change> changes;
  for (const auto& r : m_conditions[index]) {
    const uint64_t own_shared = std::min<uint64_t>(shared, r.shared_prefix_tokens);
    uint64_t held = 0;
    for (const auto& step : r.steps) {
      const uint64_t now_held =
          round_up(step.tokens - std::min(step.tokens, own_shared), block_size_tokens);
      const int holders = &step == &r.steps.front() && own_shared > 0 ? 1 : 0;
      if (now_held != held || holders != 0) {
        changes.push_back(
            {step.t_ns, holders, static_cast<int64_t>(now_held) - static_cast<int64_t>(held)});
      }
      held = now_held;
    }
    changes.push_back({r.end_ns, own_shared > 0 ? -1 : 0, -static_cast<int64_t>(held)});
  }
  std::sort(changes.begin(), changes.end());
  int64_t in_use = 0, peak = 0;
  int holders = 0;
  for (const auto& c : changes) {
    in_use += c.tokens;
    holders += c.holders;
    peak = std::max(peak, in_use + (holders > 0 ? static_cast<int64_t>(shared) : 0));
  }
  return static_cast<uint64_t>(peak);
}

ConditionTracker::ConditionTracker(metrics::MetricsScraper& scraper, const Timeline& timeline,
                                   const std::vector<workload::RequestSpec>& requests,
                                   uint32_t scrape_timeout_ms)
    : m_scraper(scraper),
      m_timeline(timeline),
      m_requests(requests),
      m_timeout_ms(scrape_timeout_ms) {}

void ConditionTracker::add(const client::RequestRecord& record) {
  // The workload is in request-id order; a resumed run's leaves out the conditions done before.
  uint32_t prefix = 0;
  const auto it = std::ranges::lower_bound(m_requests, record.request_id, {},
                                           &workload::RequestSpec::request_id);
  if (it != m_requests.end() && it->request_id == record.request_id) prefix = it->prefix_len;
  m_kv.add(record, prefix);
}

void ConditionTracker::begin() {
  m_kv.begin_condition();
  (void)m_scraper.scrape_now(m_timeout_ms);
}

void ConditionTracker::end() {
  (void)m_scraper.scrape_now(m_timeout_ms);
}

std::string ConditionTracker::progress_text(Window window) const {
  const MetricsWindowStats s = metrics_in(m_timeline.metrics(), window);
  std::string out =
      s.peak_kv_cache_usage
          ? fmt::format("KV peak {:.1f}%{} over {} scrape{}", *s.peak_kv_cache_usage * 100,
                        s.n_scrapes < k_min_condition_samples ? "*" : "", s.n_scrapes,
                        s.n_scrapes == 1 ? "" : "s")
          : fmt::format("KV - ({} scrape{})", s.n_scrapes, s.n_scrapes == 1 ? "" : "s");
  if (m_kv.n_conditions() > 0) {
    const size_t index = m_kv.n_conditions() - 1;
    const uint64_t block = s.block_size_tokens.value_or(0);
    if (auto peak = m_kv.peak_tokens(index, block)) {
      out += fmt::format(", {} tokens by request accounting", *peak);
      if (m_kv.shared_prefix_tokens(index) > 0) {
        out += fmt::format(" ({} with the shared prefix held once)",
                           m_kv.peak_tokens(index, block, true).value_or(0));
      }
    }
  }
  return out;
}

std::optional<std::string> assess_conditions(const KvAccounting& kv, bool memory_sampled,
                                             ProfileReport& report) {
  const MetricsWindowStats& run = report.server_during_load;
  const bool scraped = report.scraper.n_ok > 0;
  std::vector<std::string> thin;
  for (size_t i = 0; i < report.conditions.size(); ++i) {
    ConditionReport& c = report.conditions[i];
    ConditionKv& k = c.kv;
    k.block_size_tokens =
        c.server.block_size_tokens ? c.server.block_size_tokens : run.block_size_tokens;
    k.capacity_tokens = c.server.kv_cache_capacity_tokens ? c.server.kv_cache_capacity_tokens
                                                          : run.kv_cache_capacity_tokens;
    if (i < kv.n_conditions()) {
      k.per_request_n = kv.n_requests(i);
      k.per_request_peak_tokens = kv.peak_tokens(i, k.block_size_tokens.value_or(0));
      if (kv.shared_prefix_tokens(i) > 0) {
        k.per_request_peak_tokens_prefix_shared =
            kv.peak_tokens(i, k.block_size_tokens.value_or(0), true);
      }
    }
    if (memory_sampled) k.n_memory_samples = fewest_memory_samples(c).value_or(0);
    k.low_sample_figures.clear();
    if (scraped && c.server.n_scrapes < k_min_condition_samples) {
      if (run.peak_kv_cache_usage) k.low_sample_figures.emplace_back("kv_cache_usage");
      if (run.peak_num_requests_running) k.low_sample_figures.emplace_back("num_requests_running");
      if (run.peak_num_requests_waiting) k.low_sample_figures.emplace_back("num_requests_waiting");
    }
    if (k.n_memory_samples && *k.n_memory_samples < k_min_condition_samples) {
      k.low_sample_figures.emplace_back("peak_used_bytes");
    }
    if (!k.low_sample_figures.empty()) thin.push_back(c.requests.condition_id);
  }
  if (thin.empty()) return std::nullopt;
  std::string ids;
  for (size_t i = 0; i < thin.size() && i < 5; ++i)
    ids += (i > 0 ? ", " : "") + thin[i];
  if (thin.size() > 5) ids += fmt::format(" and {} more", thin.size() - 5);
  return fmt::format(
      "{} of {} conditions have figures from fewer than {} samples ({}; marked * in the table, "
      "low_sample_figures in summary.json): lengthen them with --min-condition-s, or leave "
      "--metrics-interval-ms on auto",
      thin.size(), report.conditions.size(), k_min_condition_samples, ids);
}

json condition_metrics_json(const ConditionReport& c) {
  const MetricsWindowStats& s = c.server;
  const ConditionKv& k = c.kv;
  const bool from_slots = s.kv_cache_source == metrics::KvSource::slots;
  json scraped = {{"peak_usage", opt_json(s.peak_kv_cache_usage)},
                  {"mean_usage", opt_json(s.mean_kv_cache_usage)},
                  {"peak_used_tokens", opt_json(s.peak_kv_cache_used_tokens)},
                  {"n_scrapes", s.n_scrapes},
                  {"source", s.kv_cache_source == metrics::KvSource::none ? json(nullptr)
                             : from_slots                                 ? json("/slots")
                                                                          : json("/metrics")}};
  std::optional<double> per_request_usage;
  if (k.per_request_peak_tokens && k.capacity_tokens && *k.capacity_tokens > 0) {
    per_request_usage =
        static_cast<double>(*k.per_request_peak_tokens) / static_cast<double>(*k.capacity_tokens);
  }
  json per_request = {
      {"peak_tokens", opt_json(k.per_request_peak_tokens)},
      {"peak_usage", opt_json(per_request_usage)},
      {"peak_tokens_prefix_shared", opt_json(k.per_request_peak_tokens_prefix_shared)},
      {"block_size_tokens", opt_json(k.block_size_tokens)},
      {"capacity_tokens", opt_json(k.capacity_tokens)},
      {"n_requests", k.per_request_n},
      {"source", k.block_size_tokens ? "client records: prompt + generated tokens of each "
                                       "in-flight request, rounded up to the server's blocks"
                                     : "client records: prompt + generated tokens of each "
                                       "in-flight request"}};
  // llama.cpp's /slots counts each busy slot's own tokens: the server's per-request accounting.
  json server_per_request = nullptr;
  if (from_slots && s.peak_kv_cache_used_tokens) {
    server_per_request = {{"peak_tokens", *s.peak_kv_cache_used_tokens},
                          {"n_scrapes", s.n_scrapes},
                          {"source", "/slots"}};
  }
  return {{"n_scrapes", s.n_scrapes},
          {"n_memory_samples", opt_json(k.n_memory_samples)},
          {"low_sample_figures", k.low_sample_figures},
          {"kv_usage",
           {{"scraped", scraped},
            {"per_request", per_request},
            {"server_per_request", server_per_request}}}};
}

std::optional<double> derived_kv_usage(const ConditionReport& c) {
  if (c.server.peak_kv_cache_usage || !c.kv.per_request_peak_tokens || !c.kv.capacity_tokens ||
      *c.kv.capacity_tokens == 0) {
    return std::nullopt;
  }
  return static_cast<double>(*c.kv.per_request_peak_tokens) /
         static_cast<double>(*c.kv.capacity_tokens);
}

std::string kv_peak_cell(const ConditionReport& c) {
  const std::string mark = has(c.kv.low_sample_figures, "kv_cache_usage") ? "*" : "";
  if (c.server.peak_kv_cache_usage)
    return fmt::format("{:.1f}%{}", *c.server.peak_kv_cache_usage * 100, mark);
  if (const auto derived = derived_kv_usage(c)) return fmt::format("~{:.1f}%", *derived * 100);
  return "-" + mark;
}

std::string kv_source_footnote(const ProfileReport& r) {
  bool from_metrics = false;
  bool from_slots = false;
  bool derived = false;
  for (const auto& c : r.conditions) {
    from_metrics |= c.server.kv_cache_source == metrics::KvSource::metrics;
    from_slots |= c.server.kv_cache_source == metrics::KvSource::slots;
    derived |= derived_kv_usage(c).has_value();
  }
  std::string out;
  if (from_metrics) out += "KV peak: the server's KV gauge in /metrics\n";
  if (from_slots) out += "KV peak: /slots, the busy slots' tokens over their n_ctx\n";
  if (derived) {
    out +=
        "~ KV peak derived: the in-flight requests' prompt and generated tokens (kvprof's "
        "records) over the slots' n_ctx; the server reports neither a KV gauge nor per-slot token "
        "counts\n";
  }
  return out;
}

std::string peak_gib_cell(const ConditionReport& c, const std::string& plain) {
  return sampled_cell(c, "peak_used_bytes", plain);
}

std::string sampled_cell(const ConditionReport& c, std::string_view figure,
                         const std::string& plain) {
  return plain + (has(c.kv.low_sample_figures, figure) ? "*" : "");
}

std::string low_sample_footnote(const ProfileReport& r) {
  for (const auto& c : r.conditions) {
    if (c.kv.low_sample_figures.empty()) continue;
    return fmt::format(
        "* from fewer than {} samples in that condition (KV: /metrics scrapes, GiB: memory "
        "samples); see low_sample_figures in summary.json\n",
        k_min_condition_samples);
  }
  return {};
}

}  // namespace kvprof::profile
