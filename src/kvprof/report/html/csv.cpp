// CSV column reader (see csv.hpp).
#include "kvprof/report/html/csv.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>

namespace kvprof::report::html {
namespace {

// Splits one line into cells (views into `line`, quotes kept); false on an unclosed quote or
// too many cells.
bool split_cells(std::string_view line, std::vector<std::string_view>& cells) {
  cells.clear();
  size_t i = 0;
  while (true) {
    if (cells.size() >= k_csv_max_columns) return false;
    size_t end = i;
    if (i < line.size() && line[i] == '"') {
      end = i + 1;
      while (true) {
        const size_t q = line.find('"', end);
        if (q == std::string_view::npos) return false;
        if (q + 1 < line.size() && line[q + 1] == '"') {
          end = q + 2;
          continue;
        }
        end = q + 1;
        break;
      }
      if (end < line.size() && line[end] != ',') {  // text after the closing quote
        const size_t comma = line.find(',', end);
        end = comma == std::string_view::npos ? line.size() : comma;
      }
    } else {
      const void* comma = std::memchr(line.data() + i, ',', line.size() - i);
      end = comma == nullptr ? line.size()
                             : static_cast<size_t>(static_cast<const char*>(comma) - line.data());
    }
    cells.push_back(line.substr(i, end - i));
    if (end >= line.size()) return true;
    i = end + 1;
  }
}

std::string unquote(std::string_view cell) {
  if (cell.size() < 2 || cell.front() != '"') return std::string(cell);
  std::string out;
  out.reserve(cell.size());
  for (size_t i = 1; i < cell.size(); ++i) {
    const char c = cell[i];
    if (c == '"') {
      if (i + 1 < cell.size() && cell[i + 1] == '"') {
        out.push_back('"');
        ++i;
        continue;
      }
      break;
    }
    out.push_back(c);
  }
  return out;
}

double parse_number(std::string_view cell) {
  if (cell.empty()) return k_csv_missing;
  const char* first = cell.data();
  const char* last = first + cell.size();
  int64_t whole = 0;
  auto [p, ec] = std::from_chars(first, last, whole);
  if (ec == std::errc() && p == last) return static_cast<double>(whole);
  double value = 0;
  auto [q, ec2] = std::from_chars(first, last, value);
  if (ec2 != std::errc() || q != last) return k_csv_missing;
  return value;
}

int column_of(const std::vector<std::string_view>& header, std::string_view name) {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  return -1;
}

}  // namespace

Expected<CsvColumns> read_csv(std::string_view text, const CsvRequest& request) {
  CsvColumns out;
  out.numeric.resize(request.numeric.size());
  out.text.resize(request.text.size());
  const auto next_line = [&](std::string_view& line) -> Expected<bool> {
    if (text.empty()) return false;
    const void* nl = std::memchr(text.data(), '\n', text.size());
    const size_t n = nl == nullptr
                         ? text.size()
                         : static_cast<size_t>(static_cast<const char*>(nl) - text.data());
    if (n > k_csv_max_line_bytes) {
      return fail(ErrorKind::input,
                  fmt::format("a line is longer than {} bytes", k_csv_max_line_bytes));
    }
    line = text.substr(0, n);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    text.remove_prefix(nl == nullptr ? n : n + 1);
    return true;
  };
  std::string_view line;
  auto got = next_line(line);
  if (!got) return std::unexpected(got.error());
  std::vector<std::string_view> header;
  if (!*got || line.empty() || !split_cells(line, header)) {
    return fail(ErrorKind::input, "no CSV header line");
  }
  std::vector<int> num_cols, text_cols;
  for (const auto& name : request.numeric)
    num_cols.push_back(column_of(header, name));
  for (const auto& name : request.text)
    text_cols.push_back(column_of(header, name));
  const int filter_col =
      request.filter_column.empty() ? -1 : column_of(header, request.filter_column);
  if (!request.filter_column.empty() && filter_col < 0) return out;  // no row can match
  size_t needed = 0;
  for (int c : num_cols)
    needed = std::max<size_t>(needed, static_cast<size_t>(c + 1));
  for (int c : text_cols)
    needed = std::max<size_t>(needed, static_cast<size_t>(c + 1));
  needed = std::max<size_t>(needed, static_cast<size_t>(filter_col + 1));
  std::vector<std::string_view> cells;
  cells.reserve(header.size());
  while (true) {
    got = next_line(line);
    if (!got) return std::unexpected(got.error());
    if (!*got) break;
    if (line.empty()) continue;
    if (out.n_rows + out.skipped_rows >= k_csv_max_rows) {
      return fail(ErrorKind::input, fmt::format("more than {} rows", k_csv_max_rows));
    }
    if (!split_cells(line, cells) || cells.size() < needed) {
      ++out.skipped_rows;
      continue;
    }
    if (filter_col >= 0 &&
        unquote(cells[static_cast<size_t>(filter_col)]) != request.filter_value) {
      continue;
    }
    for (size_t i = 0; i < num_cols.size(); ++i) {
      out.numeric[i].push_back(
          num_cols[i] < 0 ? k_csv_missing : parse_number(cells[static_cast<size_t>(num_cols[i])]));
    }
    for (size_t i = 0; i < text_cols.size(); ++i) {
      out.text[i].push_back(text_cols[i] < 0 ? std::string()
                                             : unquote(cells[static_cast<size_t>(text_cols[i])]));
    }
    ++out.n_rows;
  }
  return out;
}

Expected<CsvColumns> read_csv_file(const std::filesystem::path& path, const CsvRequest& request) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec)
    return fail(ErrorKind::io, fmt::format("cannot read '{}': {}", path.string(), ec.message()));
  if (size > k_csv_max_file_bytes) {
    return fail(ErrorKind::input, fmt::format("'{}' is larger than {} GiB", path.string(),
                                              k_csv_max_file_bytes >> 30));
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f)
    return fail(ErrorKind::io,
                fmt::format("cannot read '{}': {}", path.string(), std::strerror(errno)));
  std::string data(size, '\0');
  const size_t n = std::fread(data.data(), 1, size, f.get());
  data.resize(n);  // a trace still being written may have shrunk or grown; read what is there
  auto out = read_csv(data, request);
  if (!out) return std::unexpected(out.error().with_context(path.string()));
  return out;
}

}  // namespace kvprof::report::html
