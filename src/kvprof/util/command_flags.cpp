// Walking a program's flags (see command_flags.hpp).
#include "kvprof/util/command_flags.hpp"

#include <charconv>
#include <utility>

namespace kvprof {

bool FlagWalk::next() {
  if (started_) ++i_;
  started_ = true;
  if (i_ >= args_.size()) return false;
  const std::string& w = args_[i_];
  inline_value_.reset();
  name_ = w;
  if (w.starts_with("-")) {
    if (const size_t eq = w.find('='); eq != std::string::npos) {
      name_ = std::string_view(w).substr(0, eq);
      inline_value_ = w.substr(eq + 1);
    }
  }
  return true;
}

bool FlagWalk::is(std::initializer_list<std::string_view> names) const {
  for (auto n : names) {
    if (name_ == n) return true;
  }
  return false;
}

std::optional<std::string> FlagWalk::value() {
  if (inline_value_) return std::exchange(inline_value_, std::nullopt);
  if (i_ + 1 >= args_.size()) return std::nullopt;
  ++i_;
  return args_[i_];
}

std::optional<std::string> FlagWalk::optional_value() {
  if (inline_value_) return std::exchange(inline_value_, std::nullopt);
  if (i_ + 1 >= args_.size() || args_[i_ + 1].starts_with("-")) return std::nullopt;
  ++i_;
  return args_[i_];
}

std::optional<uint64_t> read_count(const std::optional<std::string>& value) {
  if (!value || value->empty()) return std::nullopt;
  uint64_t n = 0;
  const auto [p, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
  if (ec != std::errc{} || p != value->data() + value->size()) return std::nullopt;
  return n;
}

std::optional<double> read_number(const std::optional<std::string>& value) {
  if (!value || value->empty()) return std::nullopt;
  double x = 0;
  const auto [p, ec] = std::from_chars(value->data(), value->data() + value->size(), x);
  if (ec != std::errc{} || p != value->data() + value->size()) return std::nullopt;
  return x;
}

size_t python_module_args_start(std::span<const std::string> words, std::string_view module) {
  if (words.empty() || !program_name(words.front()).starts_with("python")) return 0;
  for (size_t i = 1; i + 1 < words.size(); ++i) {
    if (words[i] == "-m" && words[i + 1] == module) return i + 2;
  }
  return 0;
}

std::string_view program_name(std::string_view word) {
  if (const size_t slash = word.rfind('/'); slash != std::string_view::npos)
    word = word.substr(slash + 1);
  return word;
}

}  // namespace kvprof
