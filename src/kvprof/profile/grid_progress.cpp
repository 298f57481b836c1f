// The grid's progress lines.
#include "kvprof/profile/grid_progress.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "kvprof/report/text/progress_line.hpp"

namespace kvprof::profile {

GridProgress::GridProgress(uint64_t n_requests, int64_t start_ns)
    : m_n_requests(n_requests), m_start_ns(start_ns), m_now_ns(start_ns) {}

void GridProgress::update(const client::Progress& p, int64_t now_ns) {
  if (p.done == 0 && !p.condition_done) {
    m_done_before = m_done;
    m_repeats_before = m_repeats;
    m_condition_planned = p.total;
    m_planned_done_before = m_planned_done;
  }
  m_done = m_done_before + p.done;
  m_planned_done = m_planned_done_before + std::min<uint64_t>(p.done, m_condition_planned);
  // Requests sent again to reach --min-condition-s count as work too.
  m_repeats =
      m_repeats_before + (p.total > m_condition_planned ? p.total - m_condition_planned : 0);
  m_now_ns = now_ns;
}

bool GridProgress::condition_ended(const client::Progress& p) {
  return p.condition_done;
}

std::string GridProgress::eta() const {
  const double elapsed_s = static_cast<double>(m_now_ns - m_start_ns) / 1e9;
  return report::text::eta_text(report::text::eta_s(
      static_cast<double>(m_done), static_cast<double>(m_n_requests + m_repeats), elapsed_s));
}

// "6/20", or "6/20 (+16 repeats)": the grid's own requests ended of those planned (the count
// never jumps as a condition's repeats are added), and the repeats sent so far.
std::string GridProgress::count_text() const {
  return fmt::format("{}/{}{}", m_planned_done, m_n_requests,
                     m_repeats > 0 ? fmt::format(" (+{} repeats)", m_repeats) : "");
}

std::string GridProgress::status_text(const client::Progress& p) const {
  return fmt::format(
      "[{}/{}] {}: {}/{} ok{}{}; grid {} requests, {}", p.condition_index + 1, p.n_conditions,
      p.condition_id, p.ok, p.total, p.errors > 0 ? fmt::format(", {} failed", p.errors) : "",
      p.cancelled > 0 ? fmt::format(", {} cancelled", p.cancelled) : "", count_text(), eta());
}

std::string GridProgress::end_text(const client::Progress& p, double seconds,
                                   const std::string& memory, const std::string& kv) const {
  const std::string head =
      fmt::format("[{}/{}] {}: ", p.condition_index + 1, p.n_conditions, p.condition_id);
  const std::string used =
      memory.empty() && kv.empty() ? "" : fmt::format(", GPU used {}, {}", memory, kv);
  if (p.stopped) {
    return head + fmt::format(
                      "INTERRUPTED after {:.1f} s: {} of {} completed, {} failed, {} cancelled, "
                      "{} not sent{}",
                      seconds, p.ok, p.total, p.errors, p.cancelled, p.total - p.done, used);
  }
  return head + fmt::format("{}/{} ok, {} errors, {:.1f} s{}; grid {}, {}", p.ok, p.total, p.errors,
                            seconds, used, count_text(), eta());
}

}  // namespace kvprof::profile
