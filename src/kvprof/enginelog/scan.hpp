// Bounded scanning of one log line: a cursor over a string_view that reads numbers (with
// overflow checks), printed sizes ("110.53 MiB", "12.56GiB") and tokens, never past the line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvprof/enginelog/log_report.hpp"

namespace kvprof::enginelog {

// How a unit named "GB" is read: SGLang and vLLM print GiB figures as "GB".
enum class GbMeans { gib, gb };

class Cursor {
 public:
  explicit Cursor(std::string_view text) : m_text(text) {}

  [[nodiscard]] bool done() const { return m_pos >= m_text.size(); }
  [[nodiscard]] std::string_view rest() const { return m_text.substr(m_pos); }
  [[nodiscard]] size_t pos() const { return m_pos; }

  // Skips spaces and tabs.
  void skip_ws();
  // Consumes `literal` (after skipping spaces) and returns true, or leaves the cursor and returns
  // false.
  bool eat(std::string_view literal);
  // Moves past the next occurrence of `literal`; returns false (cursor unchanged) when absent.
  bool seek_past(std::string_view literal);
  // Reads an unsigned integer (digits, with thousands commas when `commas`); nullopt on no digits
  // or overflow.
  std::optional<uint64_t> read_uint(bool commas = false);
  // Reads a non-negative decimal like "15.41"; nullopt when not a finite number.
  std::optional<double> read_decimal();
  // Reads a size: a non-negative decimal, optional spaces, a unit (B, KiB, MiB, GiB, TiB, KB, MB,
  // GB); nullopt when any part is missing, "nan"/"inf", or the bytes would overflow.
  std::optional<PrintedSize> read_size(GbMeans gb = GbMeans::gib);
  // Reads up to the next space, tab or one of `stops`; empty when there is none.
  std::string_view read_token(std::string_view stops = "");

 private:
  std::string_view m_text;
  size_t m_pos = 0;
};

// Reads the items of a list of whole numbers after its '[' ("32, 16, 8]"): how many there are,
// the cursor past the ']'; nullopt when it is empty, not closed or longer than `max_items`.
std::optional<uint64_t> read_list_count(Cursor& c, uint64_t max_items = 4096);

// Returns the whitespace-delimited word that ends right before `end` in `text` (spaces skipped).
std::string_view word_before(std::string_view text, size_t end);

// Returns `text` with ANSI escape sequences (ESC [ ... letter) removed.
std::string strip_ansi(std::string_view text);

// Returns true when `text` starts with `prefix`.
inline bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// Returns true when `text` contains `part`.
inline bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

}  // namespace kvprof::enginelog
