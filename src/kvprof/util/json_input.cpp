// Exception-free JSON input (see json_input.hpp).
#include "kvprof/util/json_input.hpp"

#include <fmt/format.h>

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

}  // namespace kvprof
