// Walking the flags of a program's arguments as most servers' parsers read them: "--name value"
// and "--name=value" alike, bare flags, values that are whole counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace kvprof {

// Walks the flags of one program's arguments, "--name value" and "--name=value" alike.
class FlagWalk {
 public:
  explicit FlagWalk(std::span<const std::string> args) : args_(args) {}
  // Moves to the next word; false past the last.
  bool next();
  // The current word's flag name ("--ctx-size" of "--ctx-size=4096"), or the word itself.
  [[nodiscard]] std::string_view name() const { return name_; }
  // Whether the current word is one of `names`.
  [[nodiscard]] bool is(std::initializer_list<std::string_view> names) const;
  // The current flag's value: after '=' or the next word (then consumed); none at the end.
  std::optional<std::string> value();
  // The value only when the next word is not a flag (a bare -fa); none otherwise.
  std::optional<std::string> optional_value();

 private:
  std::span<const std::string> args_;
  size_t i_ = 0;
  bool started_ = false;
  std::string_view name_;
  std::optional<std::string> inline_value_;
};

// A whole count from a flag's value ("4096"); none for anything else.
std::optional<uint64_t> read_count(const std::optional<std::string>& value);

// A number from a flag's value ("0.85"); none for anything else.
std::optional<double> read_number(const std::optional<std::string>& value);

// `field` set to the count `value` names when it is one above 0; left as it was otherwise.
template <typename T>
void set_positive_count(T& field, const std::optional<std::string>& value) {
  if (const auto n = read_count(value); n && *n > 0) field = static_cast<T>(*n);
}

// Where the arguments of `python -m MODULE` start in `words` (python, python3, a path to
// either), or 0 when `words` is not that module run by Python.
size_t python_module_args_start(std::span<const std::string> words, std::string_view module);

// The file name of a program path ("/opt/bin/llama-server" -> "llama-server").
std::string_view program_name(std::string_view word);

}  // namespace kvprof
