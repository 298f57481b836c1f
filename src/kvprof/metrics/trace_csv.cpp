// metrics_trace.csv columns and row formatting; the column list lives only here.
#include "kvprof/metrics/trace_csv.hpp"

#include <array>
#include <string_view>

#include <fmt/format.h>

namespace kvprof::metrics {
namespace {

constexpr std::array<std::string_view, 23> k_columns{
    "mono_ns",
    "wall_ms",
    "status",
    "scrape_ms",
    "engine",
    "kv_cache_usage",
    "kv_cache_used_tokens",
    "kv_cache_capacity_tokens",
    "num_gpu_blocks",
    "block_size_tokens",
    "num_requests_running",
    "num_requests_waiting",
    "num_preemptions_total",
    "num_retracted_reqs",
    "prefix_cache_queries_total",
    "prefix_cache_hits_total",
    "prompt_tokens_total",
    "generation_tokens_total",
    "batch_max_tokens",
    "slots_busy",
    "slots_total",
    "skipped_lines",
    "kv_cache_source",
};

template <class T>
void append_cell(std::string& row, const std::optional<T>& value) {
  row.push_back(',');
  if (value) fmt::format_to(std::back_inserter(row), "{}", *value);
}

}  // namespace

std::string scrape_status_text(const ScrapeRecord& record) {
  switch (record.status) {
    case ScrapeStatus::ok:
      return "ok";
    case ScrapeStatus::http_error:
      return fmt::format("http_{}", record.http_status);
    case ScrapeStatus::unreachable:
      return "unreachable";
    case ScrapeStatus::timeout:
      return "timeout";
    case ScrapeStatus::too_large:
      return "too_large";
    case ScrapeStatus::parse_error:
      return "parse_error";
    case ScrapeStatus::error:
      return "error";
  }
  return "error";
}

std::string trace_csv_header() {
  std::string header;
  for (const auto column : k_columns) {
    if (!header.empty()) header.push_back(',');
    header.append(column);
  }
  return header;
}

std::string format_trace_row(const ScrapeRecord& record) {
  const MetricsSnapshot& s = record.snapshot;
  std::string row = fmt::format("{},{},{},{:.3f},", record.mono_ns, record.wall_ms,
                                scrape_status_text(record), record.scrape_ms);
  if (record.status == ScrapeStatus::ok) row.append(engines::engine_name(s.engine));
  append_cell(row, s.kv_cache_usage);
  append_cell(row, s.kv_cache_used_tokens);
  append_cell(row, s.kv_cache_capacity_tokens);
  append_cell(row, s.num_gpu_blocks);
  append_cell(row, s.block_size_tokens);
  append_cell(row, s.num_requests_running);
  append_cell(row, s.num_requests_waiting);
  append_cell(row, s.num_preemptions_total);
  append_cell(row, s.num_retracted_reqs);
  append_cell(row, s.prefix_cache_queries_total);
  append_cell(row, s.prefix_cache_hits_total);
  append_cell(row, s.prompt_tokens_total);
  append_cell(row, s.generation_tokens_total);
  append_cell(row, s.batch_max_tokens);
  append_cell(row, s.slots_busy);
  append_cell(row, s.slots_total);
  append_cell(row, record.skipped_lines);
  row.push_back(',');
  row.append(kv_source_name(s.kv_cache_source));
  return row;
}

}  // namespace kvprof::metrics
