// Bounded scanning of one log line (see scan.hpp).
#include "kvprof/enginelog/scan.hpp"

#include <array>
#include <cmath>
#include <cstdlib>

namespace kvprof::enginelog {
namespace {

constexpr size_t k_max_int_digits = 15;  // 10^15 MiB is far past any memory
constexpr size_t k_max_frac_digits = 6;  // keeps frac x unit inside 64 bits

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

struct Unit {
  std::string_view name;
  uint64_t bytes;
};

std::optional<uint64_t> unit_bytes(std::string_view name, GbMeans gb) {
  static constexpr std::array<Unit, 9> k_units{{{"B", 1},
                                                {"KiB", 1ULL << 10},
                                                {"MiB", 1ULL << 20},
                                                {"GiB", 1ULL << 30},
                                                {"TiB", 1ULL << 40},
                                                {"KB", 1000ULL},
                                                {"MB", 1000ULL * 1000},
                                                {"GB", 1000ULL * 1000 * 1000},
                                                {"TB", 1000ULL * 1000 * 1000 * 1000}}};
  if (name == "GB" && gb == GbMeans::gib) return 1ULL << 30;
  for (const auto& u : k_units) {
    if (u.name == name) return u.bytes;
  }
  return std::nullopt;
}

}  // namespace

void Cursor::skip_ws() {
  while (m_pos < m_text.size() && (m_text[m_pos] == ' ' || m_text[m_pos] == '\t'))
    ++m_pos;
}

bool Cursor::eat(std::string_view literal) {
  const size_t saved = m_pos;
  skip_ws();
  if (m_text.substr(m_pos, literal.size()) == literal) {
    m_pos += literal.size();
    return true;
  }
  m_pos = saved;
  return false;
}

bool Cursor::seek_past(std::string_view literal) {
  const size_t at = m_text.find(literal, m_pos);
  if (at == std::string_view::npos) return false;
  m_pos = at + literal.size();
  return true;
}

std::optional<uint64_t> Cursor::read_uint(bool commas) {
  const size_t saved = m_pos;
  skip_ws();
  uint64_t value = 0;
  size_t n_digits = 0;
  while (m_pos < m_text.size()) {
    const char c = m_text[m_pos];
    if (is_digit(c)) {
      if (__builtin_mul_overflow(value, 10ULL, &value) ||
          __builtin_add_overflow(value, static_cast<uint64_t>(c - '0'), &value)) {
        m_pos = saved;
        return std::nullopt;
      }
      ++n_digits;
    } else if (!(commas && c == ',' && n_digits > 0 && m_pos + 1 < m_text.size() &&
                 is_digit(m_text[m_pos + 1]))) {
      break;
    }
    ++m_pos;
  }
  if (n_digits == 0) {
    m_pos = saved;
    return std::nullopt;
  }
  return value;
}

std::optional<double> Cursor::read_decimal() {
  const size_t saved = m_pos;
  skip_ws();
  const size_t start = m_pos;
  while (m_pos < m_text.size() && is_digit(m_text[m_pos]))
    ++m_pos;
  if (m_pos < m_text.size() && m_text[m_pos] == '.') {
    ++m_pos;
    while (m_pos < m_text.size() && is_digit(m_text[m_pos]))
      ++m_pos;
  }
  const std::string digits(m_text.substr(start, m_pos - start));
  if (digits.empty() || digits == "." || digits.size() > 40) {
    m_pos = saved;
    return std::nullopt;
  }
  const double value = std::strtod(digits.c_str(), nullptr);
  if (!std::isfinite(value)) {
    m_pos = saved;
    return std::nullopt;
  }
  return value;
}

std::optional<PrintedSize> Cursor::read_size(GbMeans gb) {
  const size_t saved = m_pos;
  auto fail = [&]() -> std::optional<PrintedSize> {
    m_pos = saved;
    return std::nullopt;
  };
  skip_ws();
  const size_t start = m_pos;
  uint64_t int_part = 0;
  size_t n_int = 0;
  while (m_pos < m_text.size() && is_digit(m_text[m_pos])) {
    if (++n_int > k_max_int_digits) return fail();
    int_part = int_part * 10 + static_cast<uint64_t>(m_text[m_pos] - '0');
    ++m_pos;
  }
  if (n_int == 0) return fail();
  uint64_t frac_part = 0;
  uint64_t frac_scale = 1;
  size_t n_frac = 0;
  if (m_pos < m_text.size() && m_text[m_pos] == '.') {
    ++m_pos;
    while (m_pos < m_text.size() && is_digit(m_text[m_pos])) {
      if (++n_frac > k_max_frac_digits) return fail();
      frac_part = frac_part * 10 + static_cast<uint64_t>(m_text[m_pos] - '0');
      frac_scale *= 10;
      ++m_pos;
    }
    if (n_frac == 0) return fail();
  }
  skip_ws();
  const size_t unit_start = m_pos;
  while (m_pos < m_text.size() && is_alpha(m_text[m_pos]))
    ++m_pos;
  const auto unit = unit_bytes(m_text.substr(unit_start, m_pos - unit_start), gb);
  if (!unit) return fail();

  uint64_t bytes = 0;
  if (__builtin_mul_overflow(int_part, *unit, &bytes)) return fail();
  // frac_part < 10^6 and unit <= 2^40, so the product fits; round half up to the nearest byte.
  const uint64_t frac_bytes = (frac_part * *unit + frac_scale / 2) / frac_scale;
  if (__builtin_add_overflow(bytes, frac_bytes, &bytes)) return fail();

  PrintedSize size;
  size.bytes = bytes;
  size.tolerance_bytes = (*unit + 2 * frac_scale - 1) / (2 * frac_scale);
  size.text = std::string(m_text.substr(start, m_pos - start));
  return size;
}

std::string_view Cursor::read_token(std::string_view stops) {
  skip_ws();
  const size_t start = m_pos;
  while (m_pos < m_text.size()) {
    const char c = m_text[m_pos];
    if (c == ' ' || c == '\t' || stops.find(c) != std::string_view::npos) break;
    ++m_pos;
  }
  return m_text.substr(start, m_pos - start);
}

std::optional<uint64_t> read_list_count(Cursor& c, uint64_t max_items) {
  uint64_t n = 0;
  while (n < max_items && c.read_uint()) {
    ++n;
    if (!c.eat(",")) break;
  }
  if (n == 0 || !c.eat("]")) return std::nullopt;
  return n;
}

std::string_view word_before(std::string_view text, size_t end) {
  end = std::min(end, text.size());
  while (end > 0 && (text[end - 1] == ' ' || text[end - 1] == '\t'))
    --end;
  size_t start = end;
  while (start > 0 && text[start - 1] != ' ' && text[start - 1] != '\t')
    --start;
  return text.substr(start, end - start);
}

std::string strip_ansi(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
      size_t j = i + 2;
      while (j < text.size() && !is_alpha(text[j]))
        ++j;
      i = j;  // skips the final letter too (or runs off the end)
      continue;
    }
    out.push_back(text[i]);
  }
  return out;
}

}  // namespace kvprof::enginelog
