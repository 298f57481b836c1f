// Prometheus text format parser: one pass over the lines, each sample attached to its family by
// name (histogram and summary suffixes included), every count checked against ParseOptions.
#include "kvprof/metrics/prometheus.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <span>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

namespace kvprof::metrics {
namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_metric_name_start(char c) {
  return is_alpha(c) || c == '_' || c == ':';
}
bool is_metric_name_char(char c) {
  return is_metric_name_start(c) || is_digit(c);
}
bool is_label_name_start(char c) {
  return is_alpha(c) || c == '_';
}
bool is_label_name_char(char c) {
  return is_label_name_start(c) || is_digit(c);
}

bool iequal_ascii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// A read position inside one line.
class Cursor {
 public:
  explicit Cursor(std::string_view line) : m_line(line) {}
  [[nodiscard]] bool at_end() const { return m_pos >= m_line.size(); }
  [[nodiscard]] char peek() const { return at_end() ? '\0' : m_line[m_pos]; }
  void advance() { ++m_pos; }
  // Skips blanks; returns how many were skipped.
  size_t skip_blanks() {
    const size_t start = m_pos;
    while (!at_end() && is_blank(m_line[m_pos]))
      ++m_pos;
    return m_pos - start;
  }
  // Returns the run of characters up to the next blank or the end of the line.
  std::string_view read_token() {
    const size_t start = m_pos;
    while (!at_end() && !is_blank(m_line[m_pos]))
      ++m_pos;
    return m_line.substr(start, m_pos - start);
  }
  template <class Pred>
  std::string_view read_while(Pred pred) {
    const size_t start = m_pos;
    while (!at_end() && pred(m_line[m_pos]))
      ++m_pos;
    return m_line.substr(start, m_pos - start);
  }
  // Returns the metric name at the cursor, empty when there is none.
  std::string_view read_metric_name() {
    if (at_end() || !is_metric_name_start(peek())) return {};
    return read_while(is_metric_name_char);
  }
  [[nodiscard]] std::string_view rest() const {
    return m_line.substr(std::min(m_pos, m_line.size()));
  }

 private:
  std::string_view m_line;
  size_t m_pos = 0;
};

std::optional<int64_t> parse_timestamp_ms(std::string_view text) {
  int64_t ms = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  if (first != last && *first == '+') ++first;
  auto [ptr, ec] = std::from_chars(first, last, ms);
  if (ec == std::errc() && ptr == last && first != last) return ms;
  // OpenMetrics writes timestamps as (possibly fractional) seconds.
  const auto seconds = parse_prometheus_value(text);
  if (!seconds || !std::isfinite(*seconds)) return std::nullopt;
  const double ms_double = *seconds * 1000.0;
  if (std::fabs(ms_double) > 9.0e18) return std::nullopt;
  return static_cast<int64_t>(std::llround(ms_double));
}

// Suffixes a sample name may add to its family name, by family type ("" = the bare name).
std::span<const std::string_view> allowed_suffixes(MetricType type) {
  static constexpr std::array<std::string_view, 3> k_counter{"", "_total", "_created"};
  static constexpr std::array<std::string_view, 1> k_bare{""};
  static constexpr std::array<std::string_view, 4> k_histogram{"_bucket", "_sum", "_count",
                                                               "_created"};
  static constexpr std::array<std::string_view, 3> k_gaugehistogram{"_bucket", "_gsum", "_gcount"};
  static constexpr std::array<std::string_view, 4> k_summary{"", "_sum", "_count", "_created"};
  static constexpr std::array<std::string_view, 2> k_info{"", "_info"};
  switch (type) {
    case MetricType::counter:
      return k_counter;
    case MetricType::histogram:
      return k_histogram;
    case MetricType::gaugehistogram:
      return k_gaugehistogram;
    case MetricType::summary:
      return k_summary;
    case MetricType::info:
      return k_info;
    default:
      return k_bare;
  }
}

std::optional<MetricType> parse_type_word(std::string_view word) {
  if (word == "counter") return MetricType::counter;
  if (word == "gauge") return MetricType::gauge;
  if (word == "histogram") return MetricType::histogram;
  if (word == "gaugehistogram") return MetricType::gaugehistogram;
  if (word == "summary") return MetricType::summary;
  if (word == "info") return MetricType::info;
  if (word == "stateset") return MetricType::stateset;
  if (word == "untyped" || word == "unknown") return MetricType::untyped;
  return std::nullopt;
}

std::string unescape_help(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      const char next = text[i + 1];
      if (next == '\\' || next == '"') {
        out.push_back(next);
        ++i;
        continue;
      }
      if (next == 'n') {
        out.push_back('\n');
        ++i;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

// Parses the labels after '{' up to and including '}'; returns an error message or empty.
std::string parse_labels(Cursor& cur, const ParseOptions& options, std::vector<Label>& labels) {
  cur.advance();  // '{'
  while (true) {
    cur.skip_blanks();
    if (cur.at_end()) return "unterminated label set";
    if (cur.peek() == '}') {
      cur.advance();
      return {};
    }
    if (!is_label_name_start(cur.peek())) return "expected a label name";
    const std::string_view name = cur.read_while(is_label_name_char);
    cur.skip_blanks();
    if (cur.peek() != '=') return "expected '=' after a label name";
    cur.advance();
    cur.skip_blanks();
    if (cur.peek() != '"') return "expected '\"' to open a label value";
    cur.advance();
    std::string value;
    bool closed = false;
    while (!cur.at_end()) {
      const char c = cur.peek();
      cur.advance();
      if (c == '"') {
        closed = true;
        break;
      }
      if (c == '\\') {
        if (cur.at_end()) break;
        const char e = cur.peek();
        cur.advance();
        if (e == '\\') {
          value.push_back('\\');
        } else if (e == '"') {
          value.push_back('"');
        } else if (e == 'n') {
          value.push_back('\n');
        } else {
          return "invalid escape sequence in a label value";
        }
        continue;
      }
      value.push_back(c);
    }
    if (!closed) return "unterminated label value";
    if (labels.size() >= options.max_labels_per_sample) {
      return fmt::format("more than {} labels on one sample", options.max_labels_per_sample);
    }
    for (const auto& existing : labels) {
      if (existing.name == name) return "duplicate label name";
    }
    labels.push_back(Label{std::string(name), std::move(value)});
    cur.skip_blanks();
    if (cur.peek() == ',') {
      cur.advance();
    } else if (cur.peek() != '}') {
      return "expected ',' or '}' after a label value";
    }
  }
}

// Parses one sample line; returns an error message or empty.
std::string parse_sample_line(std::string_view line, const ParseOptions& options, Sample& out) {
  Cursor cur(line);
  const std::string_view name = cur.read_metric_name();
  if (name.empty()) return "expected a metric name";
  out.name.assign(name);
  const size_t n_blanks = cur.skip_blanks();
  if (cur.peek() == '{') {
    if (std::string err = parse_labels(cur, options, out.labels); !err.empty()) return err;
    cur.skip_blanks();
  } else if (n_blanks == 0 && !cur.at_end()) {
    return "unexpected character after the metric name";
  }
  if (cur.at_end()) return "missing sample value";
  const std::string_view value_text = cur.read_token();
  const auto value = parse_prometheus_value(value_text);
  if (!value) return "invalid sample value";
  out.value = *value;
  cur.skip_blanks();
  if (cur.at_end() || cur.peek() == '#') return {};  // '#' starts an OpenMetrics exemplar
  const std::string_view ts_text = cur.read_token();
  const auto ts = parse_timestamp_ms(ts_text);
  if (!ts) return "invalid timestamp";
  out.timestamp_ms = *ts;
  cur.skip_blanks();
  if (!cur.at_end() && cur.peek() != '#') return "unexpected text after the timestamp";
  return {};
}

class Parser {
 public:
  explicit Parser(const ParseOptions& options) : m_options(options) {}

  Expected<Exposition> run(std::string_view text) {
    size_t line_no = 0;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      std::string_view raw = text.substr(pos, end - pos);
      pos = end + 1;
      ++line_no;
      if (m_out.saw_eof) {
        if (trim(raw).empty()) continue;
        if (auto r = reject(line_no, "content after # EOF"); !r) return std::unexpected(r.error());
        break;
      }
      if (raw.size() > m_options.max_line_bytes) {
        const auto msg = fmt::format("longer than {} bytes", m_options.max_line_bytes);
        if (auto r = reject(line_no, msg); !r) return std::unexpected(r.error());
        continue;
      }
      const std::string_view line = trim(raw);
      if (line.empty()) continue;
      std::string err = line.front() == '#' ? parse_comment(line) : add_sample(line);
      if (m_too_many) {
        return fail(ErrorKind::input,
                    fmt::format("prometheus text: more than {} samples", m_options.max_samples));
      }
      if (!err.empty()) {
        if (auto r = reject(line_no, err); !r) return std::unexpected(r.error());
      }
    }
    return std::move(m_out);
  }

 private:
  static std::string_view trim(std::string_view s) {
    while (!s.empty() && (is_blank(s.front()) || s.front() == '\r'))
      s.remove_prefix(1);
    while (!s.empty() && (is_blank(s.back()) || s.back() == '\r'))
      s.remove_suffix(1);
    return s;
  }

  // Strict mode: an error for the line; lenient mode: counts it and goes on.
  Expected<void> reject(size_t line_no, std::string_view why) {
    const std::string msg = fmt::format("line {}: {}", line_no, why);
    if (m_options.strict) return fail(ErrorKind::input, "prometheus text " + msg);
    if (m_out.n_skipped_lines == 0) m_out.first_skip_reason = msg;
    ++m_out.n_skipped_lines;
    return {};
  }

  size_t family_index(std::string_view name) {
    const auto it = m_index.find(std::string(name));
    if (it != m_index.end()) return it->second;
    m_out.families.push_back(MetricFamily{std::string(name), MetricType::untyped, {}, {}, {}});
    m_has_type.push_back(false);
    m_has_help.push_back(false);
    m_has_unit.push_back(false);
    m_index.emplace(std::string(name), m_out.families.size() - 1);
    return m_out.families.size() - 1;
  }

  std::string parse_comment(std::string_view line) {
    Cursor cur(line.substr(1));
    cur.skip_blanks();
    const std::string_view keyword = cur.read_token();
    if (keyword == "EOF" && cur.rest().find_first_not_of(" \t") == std::string_view::npos) {
      m_out.saw_eof = true;
      return {};
    }
    if (keyword != "HELP" && keyword != "TYPE" && keyword != "UNIT") return {};  // a comment
    if (cur.skip_blanks() == 0) return fmt::format("expected a metric name after # {}", keyword);
    const std::string_view name = cur.read_metric_name();
    if (name.empty() || (!cur.at_end() && !is_blank(cur.peek()))) {
      return fmt::format("invalid metric name after # {}", keyword);
    }
    cur.skip_blanks();
    const std::string_view rest = cur.rest();
    const size_t idx = family_index(name);
    MetricFamily& family = m_out.families[idx];
    if (keyword == "HELP") {
      if (m_has_help[idx]) return "second # HELP for the same metric";
      m_has_help[idx] = true;
      family.help = unescape_help(rest);
      return {};
    }
    if (keyword == "UNIT") {
      if (m_has_unit[idx]) return "second # UNIT for the same metric";
      m_has_unit[idx] = true;
      family.unit.assign(rest);
      return {};
    }
    const auto type = parse_type_word(rest);
    if (!type) return "unknown metric type in # TYPE";
    if (m_has_type[idx]) return "second # TYPE for the same metric";
    if (!family.samples.empty()) return "# TYPE after samples of the same metric";
    m_has_type[idx] = true;
    family.type = *type;
    return {};
  }

  // Returns the index of the family `sample_name` belongs to, creating an untyped family when
  // none matches; returns npos when an existing family refuses the name.
  size_t resolve_family(std::string_view sample_name, std::string_view& suffix_out) {
    // A family whose name is the sample name minus one of the known suffixes.
    static constexpr std::array<std::string_view, 8> k_suffixes{
        "_bucket", "_count", "_sum", "_total", "_created", "_gcount", "_gsum", "_info"};
    const auto exact = m_index.find(std::string(sample_name));
    if (exact != m_index.end()) {
      for (const auto s : allowed_suffixes(m_out.families[exact->second].type)) {
        if (s.empty()) {
          suffix_out = {};
          return exact->second;
        }
      }
    }
    for (const auto suffix : k_suffixes) {
      if (sample_name.size() <= suffix.size() || !sample_name.ends_with(suffix)) continue;
      const auto base =
          m_index.find(std::string(sample_name.substr(0, sample_name.size() - suffix.size())));
      if (base == m_index.end()) continue;
      for (const auto s : allowed_suffixes(m_out.families[base->second].type)) {
        if (s == suffix) {
          suffix_out = suffix;
          return base->second;
        }
      }
    }
    if (exact != m_index.end()) return std::string_view::npos;
    suffix_out = {};
    return family_index(sample_name);
  }

  std::string add_sample(std::string_view line) {
    Sample sample;
    if (std::string err = parse_sample_line(line, m_options, sample); !err.empty()) return err;
    std::string_view suffix;
    const size_t idx = resolve_family(sample.name, suffix);
    if (idx == std::string_view::npos) return "sample name does not fit its family's type";
    MetricFamily& family = m_out.families[idx];
    const bool histogram_like =
        family.type == MetricType::histogram || family.type == MetricType::gaugehistogram;
    if (histogram_like && suffix == "_bucket") {
      const std::string* le = sample.label("le");
      if (le == nullptr || !parse_prometheus_value(*le))
        return "histogram bucket without a valid le";
    }
    if (family.type == MetricType::summary && suffix.empty()) {
      const std::string* q = sample.label("quantile");
      if (q == nullptr || !parse_prometheus_value(*q))
        return "summary sample without a valid quantile";
    }
    if (m_out.n_samples >= m_options.max_samples) {
      m_too_many = true;
      return {};
    }
    family.samples.push_back(std::move(sample));
    ++m_out.n_samples;
    return {};
  }

  const ParseOptions& m_options;
  Exposition m_out;
  std::unordered_map<std::string, size_t> m_index;
  std::vector<bool> m_has_type;
  std::vector<bool> m_has_help;
  std::vector<bool> m_has_unit;
  bool m_too_many = false;
};

}  // namespace

std::string_view metric_type_name(MetricType type) {
  switch (type) {
    case MetricType::counter:
      return "counter";
    case MetricType::gauge:
      return "gauge";
    case MetricType::histogram:
      return "histogram";
    case MetricType::gaugehistogram:
      return "gaugehistogram";
    case MetricType::summary:
      return "summary";
    case MetricType::info:
      return "info";
    case MetricType::stateset:
      return "stateset";
    case MetricType::untyped:
      return "untyped";
  }
  return "untyped";
}

const std::string* Sample::label(std::string_view label_name) const {
  for (const auto& l : labels) {
    if (l.name == label_name) return &l.value;
  }
  return nullptr;
}

const MetricFamily* Exposition::find(std::string_view name) const {
  for (const auto& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::optional<double> parse_prometheus_value(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::string_view body = text;
  bool negative = false;
  if (body.front() == '+' || body.front() == '-') {
    negative = body.front() == '-';
    body.remove_prefix(1);
  }
  if (iequal_ascii(body, "nan")) return std::numeric_limits<double>::quiet_NaN();
  if (iequal_ascii(body, "inf") || iequal_ascii(body, "infinity")) {
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  }
  if (body.empty() || body.front() == '+' || body.front() == '-') return std::nullopt;
  for (const char c : body) {
    if (!is_digit(c) && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-') {
      return std::nullopt;
    }
  }
  double value = 0.0;
  const auto [ptr, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
  if (ec != std::errc() || ptr != body.data() + body.size()) return std::nullopt;
  return negative ? -value : value;
}

Expected<Exposition> parse_prometheus_text(std::string_view text, const ParseOptions& options) {
  Parser parser(options);
  return parser.run(text);
}

}  // namespace kvprof::metrics
