// Derived answers of a profile run (see derived.hpp).
#include "kvprof/profile/derived.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <unordered_map>

#include "kvprof/profile/summary.hpp"
#include "kvprof/util/json_text.hpp"

namespace kvprof::profile {

namespace {

using nlohmann::json;

bool finite(const std::optional<double>& v) {
  return v && std::isfinite(*v);
}

// Whether one condition ran without queueing or preemption, as far as its gauges tell.
std::optional<bool> ran_clean(const ConditionFacts& f) {
  if (f.n_scrapes == 0) return std::nullopt;
  if (finite(f.preemptions) && *f.preemptions > 0) return false;
  if (finite(f.peak_waiting) && *f.peak_waiting > 0) {
    // Requests that waited only for a step's token budget (a burst of prefills over
    // max_num_batched_tokens) and then all ran at once were delayed, not held back by capacity.
    return finite(f.peak_running) && f.concurrency > 0 && *f.peak_running >= f.concurrency;
  }
  if (!finite(f.peak_waiting)) return std::nullopt;
  return true;
}

ConcurrencyAnswer answer_for(uint32_t input_tokens, const std::vector<ConditionAnswer>& all,
                             std::vector<size_t> indices) {
  ConcurrencyAnswer a;
  a.input_tokens = input_tokens;
  std::map<uint32_t, std::vector<size_t>> by_concurrency;
  for (const size_t i : indices)
    by_concurrency[all[i].facts.concurrency].push_back(i);
  a.conditions = std::move(indices);
  for (const auto& [c, members] : by_concurrency) {
    bool any_false = false, any_unknown = false;
    for (const size_t i : members) {
      const auto& v = all[i].ran_without_queueing;
      any_false = any_false || (v && !*v);
      any_unknown = any_unknown || !v;
    }
    if (any_false) {
      a.first_queued_concurrency = c;
      a.note = fmt::format("requests queued or were preempted at concurrency {}", c);
      return a;
    }
    if (any_unknown) {
      a.note = fmt::format(
          "the server's gauges cannot tell whether requests queued at concurrency {} (no scrape "
          "in the condition, or no waiting-requests gauge)",
          c);
      return a;
    }
    a.max_concurrency = c;
  }
  a.note = a.max_concurrency ? fmt::format("no concurrency run queued: the limit is {} or more",
                                           *a.max_concurrency)
                             : "no condition ran";
  return a;
}

}  // namespace

std::string_view kv_tokens_source_name(KvTokensSource source) {
  switch (source) {
    case KvTokensSource::reported:
      return "reported";
    case KvTokensSource::usage_times_capacity:
      return "usage x capacity";
    case KvTokensSource::none:
      break;
  }
  return "";
}

std::optional<double> kv_tokens_used(const metrics::MetricsSnapshot& s,
                                     std::optional<uint64_t> known_capacity_tokens,
                                     KvTokensSource& source) {
  source = KvTokensSource::none;
  if (finite(s.kv_cache_used_tokens) && *s.kv_cache_used_tokens >= 0) {
    source = KvTokensSource::reported;
    return s.kv_cache_used_tokens;
  }
  const auto capacity =
      s.kv_cache_capacity_tokens ? s.kv_cache_capacity_tokens : known_capacity_tokens;
  if (!finite(s.kv_cache_usage) || *s.kv_cache_usage < 0 || !capacity) return std::nullopt;
  source = KvTokensSource::usage_times_capacity;
  // Usage is a share of whole blocks, so the product is a whole number of tokens up to rounding.
  return std::round(*s.kv_cache_usage * static_cast<double>(*capacity));
}

KvPeak kv_peak_in(const std::vector<MetricsPoint>& points, Window window) {
  KvPeak peak;
  std::optional<uint64_t> capacity;
  for (const auto& p : points) {
    if (p.snapshot.kv_cache_capacity_tokens) capacity = p.snapshot.kv_cache_capacity_tokens;
    if (!window.contains(p.t_mono_ns)) continue;
    KvTokensSource source = KvTokensSource::none;
    const auto used = kv_tokens_used(p.snapshot, capacity, source);
    if (!used || (peak.used_tokens && *used <= *peak.used_tokens)) continue;
    peak.used_tokens = used;
    peak.source = source;
    peak.running =
        finite(p.snapshot.num_requests_running) ? p.snapshot.num_requests_running : std::nullopt;
  }
  return peak;
}

DerivedAnswers derive_answers(std::vector<ConditionFacts> facts, KvPeak load_kv_peak) {
  DerivedAnswers out;
  out.load_kv_peak = load_kv_peak;
  std::map<uint32_t, std::vector<size_t>> by_input;
  for (auto& f : facts) {
    ConditionAnswer a;
    a.ran_without_queueing = ran_clean(f);
    const uint64_t block = std::max<uint64_t>(1, f.block_size_tokens.value_or(1));
    const uint64_t tokens = uint64_t{f.input_tokens} + f.output_tokens;
    a.expected_kv_tokens_per_request = (tokens + block - 1) / block * block;
    const auto& kv = f.kv_peak;
    if (kv.used_tokens && finite(kv.running) && *kv.running >= 1) {
      a.measured_kv_tokens_per_request = *kv.used_tokens / *kv.running;
    }
    by_input[f.input_tokens].push_back(out.conditions.size());
    a.facts = std::move(f);
    out.conditions.push_back(std::move(a));
  }
  for (auto& [input, indices] : by_input)
    out.max_concurrency_without_queueing.push_back(
        answer_for(input, out.conditions, std::move(indices)));
  return out;
}

std::vector<ConditionFacts> condition_facts(const std::vector<workload::RequestSpec>& requests,
                                            const std::vector<ConditionReport>& conditions,
                                            const std::vector<MetricsPoint>& points) {
  std::unordered_map<std::string_view, const workload::RequestSpec*> first_of;
  for (const auto& r : requests)
    first_of.try_emplace(r.condition_id, &r);
  std::vector<ConditionFacts> out;
  for (const auto& c : conditions) {
    ConditionFacts f;
    f.condition_id = c.requests.condition_id;
    f.concurrency = c.requests.concurrency;
    if (const auto it = first_of.find(f.condition_id); it != first_of.end()) {
      f.input_tokens = it->second->input_len;
      f.output_tokens = it->second->output_len;
    }
    f.n_scrapes = c.server.n_scrapes;
    f.peak_running = c.server.peak_num_requests_running;
    f.peak_waiting = c.server.peak_num_requests_waiting;
    f.preemptions = c.server.preemptions;
    f.block_size_tokens = c.server.block_size_tokens;
    f.kv_peak = kv_peak_in(points, c.window);
    out.push_back(std::move(f));
  }
  return out;
}

void add_condition_fields(json& condition, const ConditionAnswer& a) {
  const auto& f = a.facts;
  condition["input_len_tokens"] = f.input_tokens;
  condition["output_len_tokens"] = f.output_tokens;
  condition["peak_num_requests_running"] = opt_json(f.peak_running);
  condition["peak_num_requests_waiting"] = opt_json(f.peak_waiting);
  condition["peak_kv_cache_used_tokens"] = opt_json(f.kv_peak.used_tokens);
  condition["peak_kv_cache_used_tokens_source"] =
      f.kv_peak.source == KvTokensSource::none ? json(nullptr)
                                               : json(kv_tokens_source_name(f.kv_peak.source));
  condition["num_requests_running_at_kv_peak"] = opt_json(f.kv_peak.running);
  condition["ran_without_queueing"] = opt_json(a.ran_without_queueing);
}

json derived_json(const DerivedAnswers& d) {
  json limits = json::array();
  for (const auto& m : d.max_concurrency_without_queueing) {
    json evidence = json::array();
    for (const size_t i : m.conditions) {
      const auto& a = d.conditions[i];
      evidence.push_back({{"condition_id", a.facts.condition_id},
                          {"concurrency", a.facts.concurrency},
                          {"output_len_tokens", a.facts.output_tokens},
                          {"n_scrapes", a.facts.n_scrapes},
                          {"peak_num_requests_running", opt_json(a.facts.peak_running)},
                          {"peak_num_requests_waiting", opt_json(a.facts.peak_waiting)},
                          {"preemptions", opt_json(a.facts.preemptions)},
                          {"ran_without_queueing", opt_json(a.ran_without_queueing)}});
    }
    limits.push_back({{"input_len_tokens", m.input_tokens},
                      {"max_concurrency", opt_json(m.max_concurrency)},
                      {"first_queued_concurrency", opt_json(m.first_queued_concurrency)},
                      {"note", m.note},
                      {"evidence", evidence}});
  }
  json per_request = json::array();
  for (const auto& a : d.conditions) {
    const auto& f = a.facts;
    const auto& measured = a.measured_kv_tokens_per_request;
    per_request.push_back(
        {{"condition_id", f.condition_id},
         {"input_len_tokens", f.input_tokens},
         {"output_len_tokens", f.output_tokens},
         {"block_size_tokens", opt_json(f.block_size_tokens)},
         {"expected_tokens", a.expected_kv_tokens_per_request},
         {"measured_tokens", opt_json(measured)},
         {"measured_over_expected",
          measured && a.expected_kv_tokens_per_request > 0
              ? json(*measured / static_cast<double>(a.expected_kv_tokens_per_request))
              : json(nullptr)},
         {"peak_kv_cache_used_tokens", opt_json(f.kv_peak.used_tokens)},
         {"num_requests_running_at_kv_peak", opt_json(f.kv_peak.running)}});
  }
  return {{"max_concurrency_without_queueing", limits}, {"kv_tokens_per_request", per_request}};
}

std::string derived_text(const DerivedAnswers& d) {
  std::string out;
  for (const auto& m : d.max_concurrency_without_queueing) {
    std::string answer = m.max_concurrency ? fmt::format("{}", *m.max_concurrency) : "none";
    if (m.max_concurrency && !m.first_queued_concurrency) answer += " (or more)";
    out += fmt::format("largest concurrency without queueing or preemption at input {}: {} -- {}\n",
                       m.input_tokens, answer, m.note);
  }
  return out;
}

}  // namespace kvprof::profile
