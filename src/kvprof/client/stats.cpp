// Percentiles and the per-condition accumulator.
#include "kvprof/client/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvprof::client {

Percentiles percentiles(std::vector<double>& values) {
  Percentiles p;
  p.n = values.size();
  if (values.empty()) return p;
  // Selection instead of a sort: the quantiles' ranks rise, so each nth_element only needs the
  // part above the rank placed before it (everything there is already >= it).
  size_t placed_below = 0;
  const auto value_of_rank = [&](size_t rank) {
    std::nth_element(values.begin() + static_cast<ptrdiff_t>(placed_below),
                     values.begin() + static_cast<ptrdiff_t>(rank), values.end());
    placed_below = rank;
    return values[rank];
  };
  const auto at = [&](double q) {
    const double rank = q * static_cast<double>(values.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(rank));
    const size_t hi = std::min(lo + 1, values.size() - 1);
    const double lo_value = value_of_rank(lo);
    const double hi_value = value_of_rank(hi);
    return lo_value + (hi_value - lo_value) * (rank - static_cast<double>(lo));
  };
  p.p50 = at(0.50);
  p.p90 = at(0.90);
  p.p99 = at(0.99);
  p.max = value_of_rank(values.size() - 1);
  p.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  return p;
}

ConditionAccumulator::ConditionAccumulator(std::string condition_id, uint32_t concurrency) {
  m_stats.condition_id = std::move(condition_id);
  m_stats.concurrency = concurrency;
}

void ConditionAccumulator::add(const RequestRecord& r) {
  ++m_stats.n_requests;
  if (r.repeat > 0) ++m_stats.n_repeated;
  m_first_intended_ns = std::min(m_first_intended_ns, r.intended_send_ns);
  if (r.end_ns != k_no_time) m_last_end_ns = std::max(m_last_end_ns, r.end_ns);
  if (r.status == RequestStatus::cancelled) {
    ++m_stats.n_cancelled;
    return;
  }
  if (r.status == RequestStatus::error) {
    ++m_stats.n_errors;
    ++m_stats.errors_by_kind[std::string(failure_kind_name(r.failure))];
    return;
  }
  ++m_stats.n_ok;
  if (!r.warning.empty()) ++m_stats.n_token_mismatches;
  m_stats.output_tokens += r.completion_tokens();
  if (r.first_token_ns != k_no_time) m_ttft_ms.push_back(r.ttft_ms());
  m_e2e_ms.push_back(r.e2e_ms());
  for (size_t i = 1; i < r.chunks.size(); ++i) {
    const double gap_ms = static_cast<double>(r.chunks[i].t_ns - r.chunks[i - 1].t_ns) / 1e6;
    const uint32_t n = std::max<uint32_t>(1, r.chunks[i].n_tokens);
    for (uint32_t k = 0; k < n; ++k)
      m_itl_ms.push_back(gap_ms / n);
  }
}

ConditionStats ConditionAccumulator::finish() const {
  ConditionStats s = m_stats;
  if (m_last_end_ns > m_first_intended_ns) {
    s.duration_s = static_cast<double>(m_last_end_ns - m_first_intended_ns) / 1e9;
    s.request_throughput_per_s = static_cast<double>(s.n_ok) / s.duration_s;
    s.output_tokens_per_s = static_cast<double>(s.output_tokens) / s.duration_s;
  }
  auto ttft = m_ttft_ms, itl = m_itl_ms, e2e = m_e2e_ms;
  s.ttft_ms = percentiles(ttft);
  s.itl_ms = percentiles(itl);
  s.e2e_ms = percentiles(e2e);
  return s;
}

namespace {
nlohmann::json to_json(const Percentiles& p) {
  const auto v = [&p](double x) { return p.n > 0 ? nlohmann::json(x) : nlohmann::json(nullptr); };
  return {{"n", p.n},        {"p50", v(p.p50)},   {"p90", v(p.p90)},
          {"p99", v(p.p99)}, {"mean", v(p.mean)}, {"max", v(p.max)}};
}
}  // namespace

nlohmann::json to_json(const ConditionStats& s) {
  return {{"condition_id", s.condition_id},
          {"concurrency", s.concurrency},
          {"status", s.interrupted ? "interrupted" : "completed"},
          {"n_planned", s.n_planned},
          {"n_requests", s.n_requests},
          {"n_not_sent", n_not_sent(s)},
          {"n_ok", s.n_ok},
          {"n_errors", s.n_errors},
          {"n_cancelled", s.n_cancelled},
          {"n_repeated", s.n_repeated},
          {"n_token_mismatches", s.n_token_mismatches},
          {"output_tokens", s.output_tokens},
          {"duration_s", s.duration_s},
          {"request_throughput_per_s", s.request_throughput_per_s},
          {"output_tokens_per_s", s.output_tokens_per_s},
          {"ttft_ms", to_json(s.ttft_ms)},
          {"itl_ms", to_json(s.itl_ms)},
          {"e2e_ms", to_json(s.e2e_ms)},
          {"errors_by_kind", s.errors_by_kind}};
}

}  // namespace kvprof::client
