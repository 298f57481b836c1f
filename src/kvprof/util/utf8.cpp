// UTF-8 cleaning and cutting (see utf8.hpp).
#include "kvprof/util/utf8.hpp"

#include <cstdint>

namespace kvprof {
namespace {

// The length of the well-formed sequence at text[i], or 0 when the byte there starts none.
size_t sequence_length(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xe0) == 0xc0) {
    n = 2;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4;
    cp = c & 0x07;
  }
  if (n == 0 || i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(text[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  const bool overlong = (n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return 0;
  return n;
}

}  // namespace

std::string to_valid_utf8(std::string_view text, bool printable) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = sequence_length(text, i);
    if (n == 0) {
      out.append("\xef\xbf\xbd");
      ++i;
      continue;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (printable && n == 1 && ((c < 0x20 && c != '\t') || c == 0x7f)) {
      out.push_back('?');
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

size_t valid_utf8_length(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = sequence_length(text, i);
    if (n == 0) break;
    i += n;
  }
  return i;
}

std::string_view utf8_prefix(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  // Back off continuation bytes (at most 3) so the cut falls before a sequence's first byte.
  for (size_t k = 0; k < 3 && end > 0 && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80;
       ++k)
    --end;
  return text.substr(0, end);
}

std::string one_line(std::string_view text, size_t max_bytes) {
  std::string line = to_valid_utf8(text);
  for (char& c : line) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' || c == '\r' || c == '\t') {
      c = ' ';
    } else if (u < 0x20 || u == 0x7f) {
      c = '?';
    }
  }
  if (line.size() <= max_bytes) return line;
  return std::string(utf8_prefix(line, max_bytes)) + "...";
}

bool has_control_chars(std::string_view text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

}  // namespace kvprof
