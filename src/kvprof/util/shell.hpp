// Text that kvprof hands to /bin/sh, and reads back: values quoted so that the shell reads each as
// one word; a command line split into the words the shell would hand its programs.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kvprof/util/error.hpp"

namespace kvprof {

// Bounds on a command line read back (it comes from a user's flag or a sweep file).
inline constexpr size_t k_max_command_chars = 64 * 1024;
inline constexpr size_t k_max_command_words = 4096;

// `word` as one POSIX shell word: unchanged when every character is plain (letters, digits and
// _ - . / : = @ % + ,), otherwise inside single quotes with each ' written as '\''. "" for "".
std::string shell_quote(std::string_view word);

// The words of `command` as /bin/sh splits them: blanks separate words, '…' keeps everything,
// "…" keeps everything but \" \\ \$ \`, a backslash outside quotes escapes the next character, a
// backslash-newline joins lines. Unquoted ; & | < > ( ) are words of their own ("&&", "|", ";"),
// so that a caller can find where one program's arguments end. No expansion is done ($VAR stays
// as written). An input error for an unclosed quote or a command over the bounds.
Expected<std::vector<std::string>> split_shell_words(std::string_view command);

// Whether `word` (from split_shell_words) is an operator that ends a simple command.
bool is_shell_operator(std::string_view word);

}  // namespace kvprof
