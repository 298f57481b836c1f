// Text that kvprof hands to /bin/sh: values quoted so that the shell reads each as one word.
#pragma once

#include <string>
#include <string_view>

namespace kvprof {

// `word` as one POSIX shell word: unchanged when every character is plain (letters, digits and
// _ - . / : = @ % + ,), otherwise inside single quotes with each ' written as '\''. "" for "".
std::string shell_quote(std::string_view word);

}  // namespace kvprof
