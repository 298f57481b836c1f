// Shell quoting and word splitting (see shell.hpp).
#include "kvprof/util/shell.hpp"

#include <fmt/format.h>

namespace kvprof {

namespace {

bool plain(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_-./:=@%+,").find(c) != std::string_view::npos;
}

bool blank(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool operator_char(char c) {
  return std::string_view(";&|<>()").find(c) != std::string_view::npos;
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

Expected<std::vector<std::string>> split_shell_words(std::string_view command) {
  if (command.size() > k_max_command_chars) {
    return fail(ErrorKind::input,
                fmt::format("the command is over {} characters", k_max_command_chars));
  }
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;  // a word has started (it may be "" from quotes)
  const auto end_word = [&]() -> bool {
    if (!in_word) return true;
    if (words.size() >= k_max_command_words) return false;
    words.push_back(std::move(word));
    word.clear();
    in_word = false;
    return true;
  };
  const auto too_many = [] {
    return fail(ErrorKind::input,
                fmt::format("the command has over {} words", k_max_command_words));
  };
  size_t i = 0;
  while (i < command.size()) {
    const char c = command[i];
    if (blank(c)) {
      if (!end_word()) return too_many();
      ++i;
    } else if (c == '\\') {
      if (i + 1 < command.size() && command[i + 1] != '\n') {
        word += command[i + 1];
        in_word = true;
      }
      i += 2;  // a backslash-newline joins the lines
    } else if (c == '\'') {
      const size_t close = command.find('\'', i + 1);
      if (close == std::string_view::npos) return fail(ErrorKind::input, "unclosed ' quote");
      word.append(command.substr(i + 1, close - i - 1));
      in_word = true;
      i = close + 1;
    } else if (c == '"') {
      size_t k = i + 1;
      for (; k < command.size() && command[k] != '"'; ++k) {
        if (command[k] == '\\' && k + 1 < command.size() &&
            std::string_view("\"\\$`\n").find(command[k + 1]) != std::string_view::npos) {
          ++k;
          if (command[k] == '\n') continue;
        }
        word += command[k];
      }
      if (k >= command.size()) return fail(ErrorKind::input, "unclosed \" quote");
      in_word = true;
      i = k + 1;
    } else if (operator_char(c)) {
      if (!end_word()) return too_many();
      // && || ;; >> << and the like are one operator word.
      size_t n = 1;
      if (i + 1 < command.size() && command[i + 1] == c && c != '(' && c != ')') n = 2;
      word.assign(command.substr(i, n));
      in_word = true;
      if (!end_word()) return too_many();
      i += n;
    } else {
      word += c;
      in_word = true;
      ++i;
    }
  }
  if (!end_word()) return too_many();
  return words;
}

bool is_shell_operator(std::string_view word) {
  return !word.empty() && operator_char(word.front()) &&
         (word.size() == 1 || (word.size() == 2 && word[1] == word[0]));
}

}  // namespace kvprof
