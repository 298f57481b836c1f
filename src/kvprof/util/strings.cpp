// String helpers.
#include "kvprof/util/strings.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace kvprof {

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<std::string_view> read_version_numbers(std::string_view v, std::span<uint32_t> out) {
  std::fill(out.begin(), out.end(), 0U);
  const char* p = v.data();
  const char* end = v.data() + v.size();
  for (size_t i = 0; i < out.size() && p < end; ++i) {
    const auto [q, ec] = std::from_chars(p, end, out[i]);
    if (ec != std::errc{}) return std::nullopt;
    p = q;
    if (p < end && *p == '.') ++p;
  }
  return std::string_view(p, static_cast<size_t>(end - p));
}

std::string_view trim_view(std::string_view s) {
  size_t begin = 0;
  size_t end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin])))
    ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1])))
    --end;
  return s.substr(begin, end - begin);
}

std::string trim(std::string_view s) {
  return std::string(trim_view(s));
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.emplace_back(s.substr(start));
      return out;
    }
    out.emplace_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1);
  std::vector<size_t> cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                        std::tolower(static_cast<unsigned char>(b[j - 1]));
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> closest_matches(std::string_view name,
                                         std::span<const std::string> candidates,
                                         size_t max_results) {
  const std::string needle = to_lower(name);
  std::vector<std::pair<size_t, std::string>> scored;
  for (const auto& c : candidates) {
    const std::string lc = to_lower(c);
    size_t score = edit_distance(needle, lc);
    // A candidate that contains the text (or the reverse) is a much better hint.
    if (!needle.empty() &&
        (lc.find(needle) != std::string::npos || needle.find(lc) != std::string::npos)) {
      score = score / 4;
    }
    scored.emplace_back(score, c);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (const auto& [score, c] : scored) {
    if (out.size() >= max_results) break;
    if (score > std::max<size_t>(needle.size(), 4)) break;
    out.push_back(c);
  }
  return out;
}

std::string percent_encode(std::string_view s) {
  static constexpr char k_hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3);
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += k_hex[c >> 4];
      out += k_hex[c & 15];
    }
  }
  return out;
}

}  // namespace kvprof
