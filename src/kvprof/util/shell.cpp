// Shell quoting (see shell.hpp).
#include "kvprof/util/shell.hpp"

namespace kvprof {

namespace {

bool plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_-./:=@%+,").find(c) != std::string_view::npos;
}

}  // namespace

std::string shell_quote(std::string_view word) {
  bool all_plain = !word.empty();
  for (char c : word)
    all_plain = all_plain && plain(c);
  if (all_plain) return std::string(word);
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

}  // namespace kvprof
