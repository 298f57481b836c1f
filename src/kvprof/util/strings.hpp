// Small string helpers shared by the parsers and the CLI.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvprof {

// Returns `s` in ASCII lower case.
std::string to_lower(std::string_view s);

// Returns `s` without leading and trailing ASCII whitespace.
std::string trim(std::string_view s);

// The part of `s` trim() keeps, as a view into `s` (valid while `s` is).
std::string_view trim_view(std::string_view s);

// Splits `s` at each `sep`; empty fields are kept.
std::vector<std::string> split(std::string_view s, char sep);

// True when `a` and `b` are equal ignoring ASCII case.
bool iequals(std::string_view a, std::string_view b);

// Percent-encodes `s` for a URL query value (RFC 3986: every byte but A-Z a-z 0-9 - . _ ~).
std::string percent_encode(std::string_view s);

// Reads up to out.size() dot-separated whole numbers from the start of `v` into `out` (missing
// ones 0) and returns what follows them ("0.4.7.post1" -> {0, 4, 7}, "post1"); nullopt when a
// number is expected and not there ("0.x").
std::optional<std::string_view> read_version_numbers(std::string_view v, std::span<uint32_t> out);

// Levenshtein distance between `a` and `b` (case-insensitive).
size_t edit_distance(std::string_view a, std::string_view b);

// Returns up to `max_results` of `candidates` closest to `name`, best first, for "did you mean".
std::vector<std::string> closest_matches(std::string_view name,
                                         std::span<const std::string> candidates,
                                         size_t max_results = 3);

}  // namespace kvprof
