// llama.cpp's tensor placement overrides (see tensor_overrides.hpp).
#include "kvprof/engines/llamacpp/tensor_overrides.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

#include "kvprof/util/strings.hpp"

namespace kvprof::engines {

namespace {

constexpr size_t k_max_value_bytes = 64 << 10;
constexpr size_t k_max_overrides = 1024;
constexpr size_t k_max_pattern_bytes = 1024;  // std::regex compiles recursively
constexpr uint32_t k_max_cpu_moe_layers = 4096;

// -1 for CPU, k for CUDA<k>; nullopt for a name llama.cpp's CUDA build does not have.
std::optional<int32_t> buffer_device(std::string_view name) {
  if (name == "CPU") return -1;
  if (!name.starts_with("CUDA") || name.size() == 4) return std::nullopt;
  int32_t k = 0;
  const auto* end = name.data() + name.size();
  const auto [p, ec] = std::from_chars(name.data() + 4, end, k);
  if (ec != std::errc{} || p != end || k < 0 || k > 255) return std::nullopt;
  return k;
}

bool is_regex(const std::string& pattern) {
  try {
    std::regex r(pattern);
    return true;
  } catch (const std::regex_error&) {
    return false;
  }
}

}  // namespace

Expected<std::vector<estimate::TensorOverride>> parse_override_tensor(std::string_view value) {
  if (value.size() > k_max_value_bytes) {
    return fail(ErrorKind::usage, "--override-tensor: over 64 KiB");
  }
  std::vector<estimate::TensorOverride> out;
  for (const auto& part : split(value, ',')) {
    if (out.size() >= k_max_overrides) {
      return fail(ErrorKind::usage, "--override-tensor: over 1024 overrides");
    }
    const size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0) {
      return fail(ErrorKind::usage,
                  fmt::format("--override-tensor: '{}' is not PATTERN=BUFFER_TYPE (e.g. "
                              "\"blk\\.(1[0-9])\\.ffn_.*_exps=CPU\")",
                              part));
    }
    if (eq > k_max_pattern_bytes) {
      return fail(ErrorKind::usage, "--override-tensor: a pattern over 1024 bytes");
    }
    estimate::TensorOverride o{part.substr(0, eq), part.substr(eq + 1)};
    if (!buffer_device(o.buffer_type)) {
      return fail(
          ErrorKind::usage,
          fmt::format("--override-tensor: unknown buffer type '{}' (CPU, CUDA0, CUDA1, ...)",
                      o.buffer_type));
    }
    if (!is_regex(o.pattern)) {
      return fail(ErrorKind::usage,
                  fmt::format("--override-tensor: '{}' is not a regular expression", o.pattern));
    }
    out.push_back(std::move(o));
  }
  return out;
}

estimate::TensorOverride cpu_moe_override() {
  return {k_expert_tensors_regex, "CPU"};
}

Expected<std::vector<estimate::TensorOverride>> n_cpu_moe_overrides(uint32_t n_layers) {
  if (n_layers > k_max_cpu_moe_layers) {
    return fail(ErrorKind::usage, fmt::format("--n-cpu-moe: {} is over 4096 layers", n_layers));
  }
  std::vector<estimate::TensorOverride> out;
  for (uint32_t il = 0; il < n_layers; ++il)
    out.push_back({fmt::format("blk\\.{}\\.ffn_(up|down|gate)_exps", il), "CPU"});
  return out;
}

Expected<std::vector<std::string>> parse_device_list(std::string_view value) {
  const std::string v = trim(value);
  if (v == "none") return std::vector<std::string>{};
  if (v.size() > 4096) return fail(ErrorKind::usage, "--device: over 4096 characters");
  std::vector<std::string> out;
  for (const auto& part : split(v, ',')) {
    const std::string name = trim(part);
    const auto device = buffer_device(name);
    if (!device || *device < 0) {
      return fail(ErrorKind::usage, fmt::format("--device: '{}' is not a GPU of llama.cpp's CUDA "
                                                "build (CUDA0, CUDA1, ... or none)",
                                                name.substr(0, 64)));
    }
    if (std::find(out.begin(), out.end(), name) != out.end())
      return fail(ErrorKind::usage, fmt::format("--device: {} given twice", name));
    out.push_back(name);
    if (out.size() > 256) return fail(ErrorKind::usage, "--device: over 256 devices");
  }
  return out;
}

std::string regex_required_literal(std::string_view pattern) {
  // A top-level alternation ("a|b") requires no one text: none is given for it.
  int depth = 0;
  bool escaped = false, in_class = false;
  for (const char c : pattern) {
    if (escaped) {
      escaped = false;
    } else if (c == '\\') {
      escaped = true;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '|' && depth == 0) {
      return {};
    }
  }
  if (depth != 0 || in_class || escaped) return {};
  // The leading literal: plain characters and escaped punctuation, up to the first other token;
  // a character a quantifier makes optional (?, *, {0,) is left out with what follows.
  std::string literal;
  size_t i = !pattern.empty() && pattern[0] == '^' ? 1 : 0;
  const auto plain = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '/' ||
           c == ':' || c == ',' || c == ' ' || c == '=' || c == '@' || c == '#';
  };
  while (i < pattern.size()) {
    char c = pattern[i];
    size_t width = 1;
    if (c == '\\') {
      if (i + 1 >= pattern.size() || std::isalnum(static_cast<unsigned char>(pattern[i + 1])) != 0)
        break;  // \d, \w, \b, \1, ...: not a literal
      c = pattern[i + 1];
      width = 2;
    } else if (!plain(c)) {
      break;
    }
    const size_t next = i + width;
    if (next < pattern.size() &&
        (pattern[next] == '?' || pattern[next] == '*' || pattern[next] == '{'))
      break;
    literal += c;
    i = next;
  }
  return literal;
}

TensorPlacement::TensorPlacement(const std::vector<estimate::TensorOverride>& overrides) {
  for (const auto& o : overrides) {
    const auto device = buffer_device(o.buffer_type);
    if (!device) continue;  // refused when read
    try {
      // Compiled once: the fit builds a placement for every candidate it measures.
      m_rules.push_back({regex_required_literal(o.pattern), std::regex(o.pattern), *device});
    } catch (const std::regex_error&) {
      continue;  // refused when read
    }
  }
}

std::optional<int32_t> TensorPlacement::device_of(std::string_view tensor_name) const {
  for (const auto& rule : m_rules) {
    // Most of the fit's patterns name one layer: a name without its text is passed over unread.
    if (!rule.literal.empty() && tensor_name.find(rule.literal) == std::string_view::npos) continue;
    if (std::regex_search(tensor_name.begin(), tensor_name.end(), rule.pattern)) return rule.device;
  }
  return std::nullopt;
}

}  // namespace kvprof::engines
