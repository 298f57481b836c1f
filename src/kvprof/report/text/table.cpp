// Text table rendering.
#include "kvprof/report/text/table.hpp"

#include <algorithm>
#include <cctype>

namespace kvprof::report::text {
namespace {

// Display width of UTF-8 text: counts code points, not bytes.
size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

bool looks_numeric(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) ||
                        (s.size() > 1 && (s[0] == '-' || s[0] == '+') &&
                         std::isdigit(static_cast<unsigned char>(s[1]))));
}

}  // namespace

std::string Table::render() const {
  std::vector<size_t> widths(m_headers.size(), 0);
  for (size_t i = 0; i < m_headers.size(); ++i)
    widths[i] = display_width(m_headers[i]);
  for (const auto& row : m_rows) {
    for (size_t i = 0; i < widths.size() && i < row.size(); ++i) {
      widths[i] = std::max(widths[i], display_width(row[i]));
    }
  }
  auto line = [&](const std::vector<std::string>& cells, bool header) {
    std::string out;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      const size_t pad = widths[i] - display_width(cell);
      const bool right = !header && looks_numeric(cell);
      if (i > 0) out += "  ";
      if (right) out.append(pad, ' ');
      out += cell;
      if (!right && i + 1 < widths.size()) out.append(pad, ' ');
    }
    while (!out.empty() && out.back() == ' ')
      out.pop_back();
    return out + "\n";
  };
  std::string out = line(m_headers, true);
  size_t total = 0;
  for (size_t w : widths)
    total += w;
  total += widths.empty() ? 0 : 2 * (widths.size() - 1);
  out += std::string(total, '-') + "\n";
  for (const auto& row : m_rows)
    out += line(row, false);
  return out;
}

}  // namespace kvprof::report::text
