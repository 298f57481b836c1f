// Plain-text tables for the terminal: columns sized to their widest cell, numbers right-aligned.
#pragma once

#include <string>
#include <vector>

namespace kvprof::report::text {

class Table {
 public:
  explicit Table(std::vector<std::string> headers) : m_headers(std::move(headers)) {}

  // Appends a row; missing cells print empty, extra cells are ignored.
  void add_row(std::vector<std::string> cells) { m_rows.push_back(std::move(cells)); }

  // Renders the header, a rule and the rows, each line ending in '\n'.
  [[nodiscard]] std::string render() const;

 private:
  std::vector<std::string> m_headers;
  std::vector<std::vector<std::string>> m_rows;
};

}  // namespace kvprof::report::text
