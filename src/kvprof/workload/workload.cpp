// Workload generation: the condition grid, deterministic prompts (token IDs or one-token words)
// with shared prefixes, and Poisson arrival offsets.
#include "kvprof/workload/workload.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>

namespace kvprof::workload {

namespace {

// splitmix64: a small, fully specified generator, so workloads are the same on every platform
// and standard library (std::uniform_int_distribution is not).
class Rng {
 public:
  explicit Rng(uint64_t seed) : m_state(seed) {}
  uint64_t next() {
    uint64_t z = (m_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (multiply-shift; the bias is below 2^-32 for the ranges used here).
  uint32_t below(uint32_t n) {
    return static_cast<uint32_t>(((next() >> 32) * static_cast<uint64_t>(n)) >> 32);
  }
  // Uniform in [0, 1).
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t m_state;
};

uint64_t mix(uint64_t a, uint64_t b) {
  return Rng(a ^ (b * 0x9E3779B97F4A7C15ull)).next();
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : s)
    h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

// Common English words that BPE tokenizers (Llama, Qwen, Mistral, GPT) encode as one token
// each when preceded by a space.
constexpr std::array<std::string_view, 96> k_words = {
    "the",    "of",    "and",   "to",    "in",    "is",    "that",  "for",   "it",    "as",
    "was",    "with",  "be",    "by",    "on",    "not",   "he",    "this",  "are",   "or",
    "his",    "from",  "at",    "which", "but",   "have",  "an",    "had",   "they",  "you",
    "were",   "their", "one",   "all",   "we",    "can",   "her",   "has",   "there", "been",
    "if",     "more",  "when",  "will",  "would", "who",   "so",    "no",    "out",   "up",
    "into",   "do",    "any",   "your",  "what",  "some",  "time",  "only",  "other", "new",
    "could",  "than",  "two",   "may",   "first", "then",  "back",  "like",  "now",   "over",
    "also",   "after", "made",  "many",  "most",  "such",  "where", "these", "years", "way",
    "people", "water", "world", "house", "city",  "great", "small", "large", "light", "night",
    "day",    "year",  "work",  "part",  "place", "state"};

Expected<void> check_list(const std::vector<uint32_t>& values, std::string_view name,
                          uint32_t max_value) {
  if (values.empty()) return fail(ErrorKind::usage, fmt::format("{} is empty", name));
  for (const uint32_t v : values) {
    if (v == 0 || v > max_value) {
      return fail(ErrorKind::usage,
                  fmt::format("{}: {} is out of range (1..{})", name, v, max_value));
    }
  }
  return {};
}

uint64_t requests_per_condition(const GridOptions& o, uint32_t concurrency) {
  return o.count_mode == CountMode::exact ? o.n_per_condition
                                          : uint64_t{o.n_per_condition} * concurrency;
}

uint32_t prefix_len_for(const GridOptions& o, uint32_t input_len, PrefixMode mode) {
  if (mode == PrefixMode::low) return 0;
  const auto len = static_cast<uint32_t>(std::floor(o.prefix_fraction * input_len));
  return std::min(len, input_len - 1);  // at least one token differs between requests
}

template <class T>
Expected<T> parse_enum(std::string_view text, std::string_view what,
                       std::initializer_list<std::pair<std::string_view, T>> names) {
  std::string expected;
  for (const auto& [name, value] : names) {
    if (text == name) return value;
    expected += expected.empty() ? "" : ", ";
    expected += name;
  }
  return fail(ErrorKind::input, fmt::format("unknown {} '{}' (expected {})", what, text, expected));
}

}  // namespace

std::string_view prefix_mode_name(PrefixMode mode) {
  return mode == PrefixMode::high ? "high" : "low";
}
Expected<PrefixMode> parse_prefix_mode(std::string_view text) {
  return parse_enum<PrefixMode>(text, "prefix mode",
                                {{"low", PrefixMode::low}, {"high", PrefixMode::high}});
}
std::string_view prompt_format_name(PromptFormat format) {
  return format == PromptFormat::text ? "text" : "tokens";
}
Expected<PromptFormat> parse_prompt_format(std::string_view text) {
  return parse_enum<PromptFormat>(text, "prompt format",
                                  {{"tokens", PromptFormat::tokens}, {"text", PromptFormat::text}});
}
std::string_view arrival_name(Arrival arrival) {
  return arrival == Arrival::poisson ? "poisson" : "closed";
}
Expected<Arrival> parse_arrival(std::string_view text) {
  return parse_enum<Arrival>(text, "arrival",
                             {{"closed", Arrival::closed}, {"poisson", Arrival::poisson}});
}
std::string_view count_mode_name(CountMode mode) {
  return mode == CountMode::exact ? "exact" : "times-concurrency";
}
Expected<CountMode> parse_count_mode(std::string_view text) {
  return parse_enum<CountMode>(
      text, "count mode",
      {{"times-concurrency", CountMode::times_concurrency}, {"exact", CountMode::exact}});
}

std::string condition_id(uint32_t input_len, uint32_t output_len, uint32_t concurrency,
                         PrefixMode mode) {
  return fmt::format("in{}_out{}_c{}_{}", input_len, output_len, concurrency,
                     prefix_mode_name(mode));
}

Expected<void> validate(const GridOptions& o) {
  if (auto r = check_list(o.input_lens, "input lengths", k_max_input_len); !r) return r;
  if (auto r = check_list(o.output_lens, "output lengths", k_max_output_len); !r) return r;
  if (auto r = check_list(o.concurrencies, "concurrencies", k_max_concurrency); !r) return r;
  if (o.prefix_modes.empty()) return fail(ErrorKind::usage, "prefix modes is empty");
  if (o.n_per_condition == 0) return fail(ErrorKind::usage, "n per condition must be at least 1");
  if (!(o.request_rate >= 0.0) || !std::isfinite(o.request_rate)) {
    return fail(ErrorKind::usage, "request rate must be a non-negative number");
  }
  if (!(o.prefix_fraction >= 0.0 && o.prefix_fraction < 1.0)) {
    return fail(ErrorKind::usage, "prefix fraction must be in [0, 1)");
  }
  if (o.token_id_min >= o.token_id_max) {
    return fail(ErrorKind::usage, "the token ID range is empty");
  }
  const GridSize size = grid_size(o);
  if (size.n_requests > k_max_requests) {
    return fail(ErrorKind::usage, fmt::format("the workload would have {} requests (at most {})",
                                              size.n_requests, k_max_requests));
  }
  if (size.n_prompt_tokens > k_max_total_prompt_tokens) {
    return fail(ErrorKind::usage,
                fmt::format("the workload would have {} prompt tokens in all (at most {})",
                            size.n_prompt_tokens, k_max_total_prompt_tokens));
  }
  return {};
}

GridSize grid_size(const GridOptions& o) {
  GridSize size;
  for (const uint32_t in : o.input_lens) {
    for (size_t i_out = 0; i_out < o.output_lens.size(); ++i_out) {
      for (const uint32_t c : o.concurrencies) {
        const uint64_t n = requests_per_condition(o, c);
        size.n_conditions += o.prefix_modes.size();
        size.n_requests += n * o.prefix_modes.size();
        size.n_prompt_tokens += n * in * o.prefix_modes.size();
      }
    }
  }
  return size;
}

Expected<std::vector<RequestSpec>> generate(const GridOptions& o) {
  if (auto ok = validate(o); !ok) return std::unexpected(ok.error());
  const uint32_t id_span = o.token_id_max - o.token_id_min;
  std::vector<RequestSpec> requests;
  requests.reserve(grid_size(o).n_requests);
  for (const uint32_t in : o.input_lens) {
    for (const uint32_t out : o.output_lens) {
      for (const uint32_t c : o.concurrencies) {
        for (const PrefixMode mode : o.prefix_modes) {
          const std::string id = condition_id(in, out, c, mode);
          const uint64_t condition_seed = mix(o.seed, fnv1a(id));
          const uint32_t prefix_len = prefix_len_for(o, in, mode);
          // The shared prefix: the same draws for every request of this condition.
          std::vector<uint32_t> prefix(prefix_len);
          Rng prefix_rng(mix(condition_seed, 1));
          for (auto& t : prefix)
            t = prefix_rng.below(id_span);
          Rng arrival_rng(mix(condition_seed, 2));
          double offset_s = 0.0;
          const uint64_t n = requests_per_condition(o, c);
          for (uint64_t k = 0; k < n; ++k) {
            RequestSpec r;
            r.request_id = requests.size();
            r.condition_id = id;
            r.input_len = in;
            r.output_len = out;
            r.concurrency = c;
            r.prefix_mode = mode;
            r.prefix_len = prefix_len;
            r.prompt_format = o.prompt_format;
            r.max_tokens = out;
            r.ignore_eos = true;
            if (o.request_rate > 0.0) {
              r.arrival = Arrival::poisson;
              if (k > 0) offset_s += -std::log1p(-arrival_rng.unit()) / o.request_rate;
              r.send_offset_s = offset_s;
            }
            // Draws: the prefix, then this request's own suffix.
            std::vector<uint32_t> draws = prefix;
            draws.reserve(in);
            Rng suffix_rng(mix(condition_seed, 1000 + k));
            while (draws.size() < in)
              draws.push_back(suffix_rng.below(id_span));
            if (o.prompt_format == PromptFormat::tokens) {
              for (auto& t : draws)
                t += o.token_id_min;
              r.prompt_token_ids = std::move(draws);
            } else {
              r.prompt_text.reserve(size_t{in} * 6);
              for (size_t i = 0; i < draws.size(); ++i) {
                if (i > 0) r.prompt_text.push_back(' ');
                r.prompt_text.append(k_words[draws[i] % k_words.size()]);
              }
            }
            requests.push_back(std::move(r));
          }
        }
      }
    }
  }
  return requests;
}

std::vector<Condition> conditions_of(const std::vector<RequestSpec>& requests) {
  std::vector<Condition> out;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (out.empty() || out.back().id != requests[i].condition_id) {
      out.push_back({requests[i].condition_id, i, 0});
    }
    ++out.back().count;
  }
  return out;
}

}  // namespace kvprof::workload
