// Column-wise reading of the CSV traces in a run folder (gpu_mem_trace.csv, host_mem_trace.csv,
// metrics_trace.csv, request_trace.csv): the header names the columns, each wanted column comes
// back whole. Every length is bounded; quoted cells ("a,b", "say ""hi""") are understood.
#pragma once

#include <cstddef>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof::report::html {

inline constexpr size_t k_csv_max_line_bytes = size_t{1} << 20;  // one row (token times)
inline constexpr size_t k_csv_max_columns = 256;
inline constexpr size_t k_csv_max_rows = 200'000'000;
inline constexpr uint64_t k_csv_max_file_bytes = uint64_t{16} << 30;

inline constexpr double k_csv_missing = std::numeric_limits<double>::quiet_NaN();

// Which columns to read; a column the header lacks comes back all missing.
struct CsvRequest {
  std::vector<std::string> numeric;  // cells parsed as numbers, NaN when empty or not a number
  std::vector<std::string> text;     // cells as text, quotes removed
  std::string filter_column;         // when set, only rows whose cell equals filter_value
  std::string filter_value;
};

struct CsvColumns {
  std::vector<std::vector<double>> numeric;  // in CsvRequest::numeric's order
  std::vector<std::vector<std::string>> text;
  size_t n_rows = 0;
  size_t skipped_rows = 0;  // rows with fewer cells than the header (a cut-off last row)
};

// Reads `text` (header line first); an input error for a missing header, a line over
// k_csv_max_line_bytes or more than k_csv_max_columns columns or k_csv_max_rows rows.
Expected<CsvColumns> read_csv(std::string_view text, const CsvRequest& request);

// Reads the file at `path` (at most k_csv_max_file_bytes); io error when it cannot be read.
Expected<CsvColumns> read_csv_file(const std::filesystem::path& path, const CsvRequest& request);

}  // namespace kvprof::report::html
