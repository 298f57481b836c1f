// Exception-free JSON input (see json_input.hpp).
#include "kvprof/util/json_input.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kvprof {

std::string json_error_text(const nlohmann::json::exception& e) {
  std::string what = e.what();
  if (what.starts_with("[json.exception.")) {
    if (const auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
  }
  return what;
}

Expected<nlohmann::json> parse_json_input(std::string_view text, std::string_view source) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    return fail(ErrorKind::input, fmt::format("{}: not valid JSON (byte {}): {}", source, e.byte,
                                              json_error_text(e)));
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorKind::input, fmt::format("{}: {}", source, json_error_text(e)));
  }
}

size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0;
  size_t max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace kvprof
