// The strict fast-path scanner for streamed OpenAI chunks (see chunk_scan.hpp).
#include "kvprof/client/chunk_scan.hpp"

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

namespace kvprof::client {

namespace {

constexpr int k_max_depth = 64;

// Length of the valid UTF-8 sequence starting at s[i], or 0 when invalid.
size_t utf8_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const auto cont = [&](size_t k) { return k < s.size() && (b(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;
    return 4;
  }
  return 0;
}

// Bytes a JSON string may hold as they are: printable ASCII except '"' and '\\'.
constexpr auto k_plain_string_byte = [] {
  std::array<bool, 256> table{};
  for (int c = 0x20; c < 0x80; ++c)
    table[c] = c != '"' && c != '\\';
  return table;
}();

// Index (0-7) of the first byte of `word` (little-endian) that a string scan must look at: a
// control byte, '"', '\\' or a byte above 0x7F; 8 when all 8 bytes are plain. The zero-byte and
// less-than tests of "Bit Twiddling Hacks" can flag a byte wrongly only above a true hit, so the
// lowest flag is exact.
int first_special_byte(uint64_t word) {
  constexpr uint64_t k_ones = 0x0101010101010101ULL;
  constexpr uint64_t k_high = 0x8080808080808080ULL;
  const auto zero_bytes = [](uint64_t x) { return (x - k_ones) & ~x & k_high; };
  const uint64_t special = ((word - k_ones * 0x20) & ~word & k_high) |
                           zero_bytes(word ^ (k_ones * '"')) | zero_bytes(word ^ (k_ones * '\\')) |
                           (word & k_high);
  return std::countr_zero(special) / 8;
}

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

class Scanner {
 public:
  explicit Scanner(std::string_view s) : m_s(s) {}

  void ws() {
    while (m_i < m_s.size() &&
           (m_s[m_i] == ' ' || m_s[m_i] == '\t' || m_s[m_i] == '\n' || m_s[m_i] == '\r')) {
      ++m_i;
    }
  }
  bool peek(char c) {
    ws();
    return m_i < m_s.size() && m_s[m_i] == c;
  }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++m_i;
    return true;
  }
  bool at_end() {
    ws();
    return m_i == m_s.size();
  }
  bool eat_word(std::string_view w) {
    ws();
    if (m_s.substr(m_i, w.size()) != w) return false;
    m_i += w.size();
    return true;
  }

  // A string; `raw` is its content between the quotes, `escaped` whether it holds escapes.
  bool string(std::string_view& raw, bool& escaped) {
    if (!eat('"')) return false;
    const size_t start = m_i;
    escaped = false;
    while (m_i < m_s.size()) {
      // Plain bytes 8 at a time while 8 remain, then one table look-up per plain byte; the
      // checks below see only the bytes that matter.
      while (m_i + sizeof(uint64_t) <= m_s.size()) {
        uint64_t word = 0;
        std::memcpy(&word, m_s.data() + m_i, sizeof word);
        const int plain = first_special_byte(word);
        m_i += static_cast<size_t>(plain);
        if (plain < 8) break;
      }
      while (m_i < m_s.size() && k_plain_string_byte[static_cast<unsigned char>(m_s[m_i])])
        ++m_i;
      if (m_i >= m_s.size()) break;
      const auto c = static_cast<unsigned char>(m_s[m_i]);
      if (c == '"') {
        raw = m_s.substr(start, m_i - start);
        ++m_i;
        return true;
      }
      if (c < 0x20) return false;
      if (c == '\\') {
        escaped = true;
        if (m_i + 1 >= m_s.size()) return false;
        const char e = m_s[m_i + 1];
        if (e == 'u') {
          if (m_i + 5 >= m_s.size()) return false;
          for (size_t k = 2; k < 6; ++k) {
            if (!is_hex(m_s[m_i + k])) return false;
          }
          m_i += 6;
        } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                   e == 'r' || e == 't') {
          m_i += 2;
        } else {
          return false;
        }
        continue;
      }
      if (c >= 0x80) {
        const size_t n = utf8_len(m_s, m_i);
        if (n == 0) return false;
        m_i += n;
        continue;
      }
      ++m_i;
    }
    return false;
  }

  // A JSON number; `value` is set when it is a non-negative integer that fits uint64.
  bool number(std::optional<uint64_t>& value) {
    ws();
    const size_t start = m_i;
    if (m_i < m_s.size() && m_s[m_i] == '-') ++m_i;
    if (m_i >= m_s.size()) return false;
    if (m_s[m_i] == '0') {
      ++m_i;
    } else if (m_s[m_i] >= '1' && m_s[m_i] <= '9') {
      while (m_i < m_s.size() && m_s[m_i] >= '0' && m_s[m_i] <= '9')
        ++m_i;
    } else {
      return false;
    }
    bool integer = true;
    if (m_i < m_s.size() && m_s[m_i] == '.') {
      integer = false;
      ++m_i;
      if (m_i >= m_s.size() || m_s[m_i] < '0' || m_s[m_i] > '9') return false;
      while (m_i < m_s.size() && m_s[m_i] >= '0' && m_s[m_i] <= '9')
        ++m_i;
    }
    if (m_i < m_s.size() && (m_s[m_i] == 'e' || m_s[m_i] == 'E')) {
      integer = false;
      ++m_i;
      if (m_i < m_s.size() && (m_s[m_i] == '+' || m_s[m_i] == '-')) ++m_i;
      if (m_i >= m_s.size() || m_s[m_i] < '0' || m_s[m_i] > '9') return false;
      while (m_i < m_s.size() && m_s[m_i] >= '0' && m_s[m_i] <= '9')
        ++m_i;
    }
    value.reset();
    const std::string_view digits = m_s.substr(start, m_i - start);
    if (integer && digits.front() != '-' && digits.size() > 19) return false;  // decline
    if (integer && digits.front() != '-') {
      uint64_t v = 0;
      for (const char d : digits)
        v = v * 10 + static_cast<uint64_t>(d - '0');
      value = v;
    }
    return true;
  }

  bool skip_value(int depth = 0) {
    if (depth > k_max_depth) return false;
    ws();
    if (m_i >= m_s.size()) return false;
    const char c = m_s[m_i];
    if (c == '"') {
      std::string_view raw;
      bool escaped = false;
      return string(raw, escaped);
    }
    if (c == '{') {
      ++m_i;
      if (eat('}')) return true;
      do {
        std::string_view key;
        bool escaped = false;
        if (!string(key, escaped) || !eat(':') || !skip_value(depth + 1)) return false;
      } while (eat(','));
      return eat('}');
    }
    if (c == '[') {
      ++m_i;
      if (eat(']')) return true;
      do {
        if (!skip_value(depth + 1)) return false;
      } while (eat(','));
      return eat(']');
    }
    if (c == 't') return eat_word("true");
    if (c == 'f') return eat_word("false");
    if (c == 'n') return eat_word("null");
    std::optional<uint64_t> ignored;
    return number(ignored);
  }

  // A string or null that must not hold escapes; appends it to `out`. False to decline.
  bool plain_string_or_null(std::string* out, bool* present) {
    if (peek('n')) return eat_word("null");
    std::string_view raw;
    bool escaped = false;
    if (!string(raw, escaped) || escaped) return false;
    if (out != nullptr) out->append(raw);
    if (present != nullptr) *present = true;
    return true;
  }

 private:
  std::string_view m_s;
  size_t m_i = 0;
};

// Iterates an object's members: `member(key)` scans the value; false declines.
template <class F>
bool object(Scanner& sc, F&& member) {
  if (!sc.eat('{')) return false;
  if (sc.eat('}')) return true;
  do {
    std::string_view key;
    bool escaped = false;
    if (!sc.string(key, escaped) || escaped || !sc.eat(':')) return false;
    if (!member(key)) return false;
  } while (sc.eat(','));
  return sc.eat('}');
}

bool scan_choice(Scanner& sc, ScannedChunk& out) {
  return object(sc, [&](std::string_view key) {
    if (key == "text") return sc.plain_string_or_null(&out.text, &out.has_text_field);
    if (key == "finish_reason") return sc.plain_string_or_null(&out.finish_reason, nullptr);
    if (key == "delta") {
      if (sc.peek('n')) return sc.eat_word("null");
      return object(sc, [&](std::string_view dkey) {
        if (dkey == "content" || dkey == "reasoning_content" || dkey == "reasoning") {
          return sc.plain_string_or_null(&out.text, &out.has_text_field);
        }
        return sc.skip_value();
      });
    }
    return sc.skip_value();
  });
}

}  // namespace

bool scan_chunk(std::string_view json, ScannedChunk& out) {
  Scanner sc(json);
  bool seen_choices = false;
  const bool ok = object(sc, [&](std::string_view key) {
    if (key == "error") return false;  // the slow path reports errors
    if (key == "choices") {
      if (seen_choices) return false;
      seen_choices = true;
      if (!sc.eat('[')) return false;
      if (sc.eat(']')) return true;
      if (!sc.peek('{') || !scan_choice(sc, out)) return false;
      while (sc.eat(',')) {
        if (!sc.skip_value()) return false;
      }
      return sc.eat(']');
    }
    if (key == "usage") {
      if (sc.peek('n')) return sc.eat_word("null");
      if (out.has_usage) return false;
      out.has_usage = true;
      return object(sc, [&](std::string_view ukey) {
        if (ukey == "prompt_tokens" || ukey == "completion_tokens") {
          std::optional<uint64_t> v;
          if (!sc.number(v)) return false;
          if (v) (ukey == "prompt_tokens" ? out.prompt_tokens : out.completion_tokens) = *v;
          return true;
        }
        return sc.skip_value();
      });
    }
    return sc.skip_value();
  });
  return ok && sc.at_end();
}

}  // namespace kvprof::client
