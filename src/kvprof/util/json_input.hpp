// JSON from outside (model configs, server answers, files users give): every exception the JSON
// library can throw — a syntax error, a number beyond a double's range, invalid UTF-8, a field of
// the wrong type read with get<>/at() — becomes an input error naming the source, so a bad file
// is never an "internal error".
#pragma once

#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "kvprof/util/error.hpp"

namespace kvprof {

// The JSON library's message without its "[json.exception.x.N] " prefix.
std::string json_error_text(const nlohmann::json::exception& e);

// Deepest nesting of JSON arrays and objects in `text` (strings skipped): inputs nested deeper
// than a parser allows are refused before nlohmann's recursive parser and copies see them.
size_t json_nesting_depth(std::string_view text);

// Parses `text` from `source` (a path or URL, for the message). An input error
// "SOURCE: not valid JSON (byte N): ..." or "SOURCE: ..." for anything the library rejects.
Expected<nlohmann::json> parse_json_input(std::string_view text, std::string_view source);

// Runs `read()` (which returns Expected<T>) and turns any JSON library exception it throws into
// an input error "SOURCE: ...".
template <class F>
auto read_json_input(std::string_view source, F&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorKind::input, std::string(source) + ": " + json_error_text(e));
  }
}

}  // namespace kvprof
