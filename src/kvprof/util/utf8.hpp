// Text from outside (server answers, logs, files) made safe to print and to write as JSON, which
// needs valid UTF-8: bad bytes replaced, and cuts that never split a character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvprof {

// `text` as valid UTF-8: each byte that does not start a well-formed sequence (truncated,
// overlong, a surrogate, past U+10FFFF) becomes U+FFFD; control characters other than tab
// become '?' when `printable`.
std::string to_valid_utf8(std::string_view text, bool printable = false);

// The length of the longest prefix of `text` that is valid UTF-8 (text.size() when all of it is).
size_t valid_utf8_length(std::string_view text);

// The longest prefix of `text` of at most `max_bytes` bytes that does not end inside a UTF-8
// sequence (a valid string stays valid when cut).
std::string_view utf8_prefix(std::string_view text, size_t max_bytes);

// `text` as one printable line for a message: valid UTF-8 (bad bytes become U+FFFD), line breaks
// and tabs as spaces, other control characters as '?', and when longer than `max_bytes` cut
// between characters with "..." added.
std::string one_line(std::string_view text, size_t max_bytes = 300);

// True when `text` holds a control character (bytes 0x00-0x1f and 0x7f): values kvprof passes to a
// shell, a terminal or a server must not.
bool has_control_chars(std::string_view text);

}  // namespace kvprof
