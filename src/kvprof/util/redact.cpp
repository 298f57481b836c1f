// Secret redaction (see redact.hpp).
#include "kvprof/util/redact.hpp"

#include <regex>

namespace kvprof {

namespace {

// A value as a shell word: quoted, or up to the next blank or shell operator.
constexpr const char* k_value = R"(("[^"]*"|'[^']*'|[^\s"';&|]+))";

const std::regex& flag_pattern() {
  static const std::regex re(
      std::string(R"((--?[A-Za-z0-9_-]*(api[-_]?key|token|password|passwd|secret))(=|\s+))") +
          k_value,
      std::regex::icase | std::regex::ECMAScript);
  return re;
}

const std::regex& env_pattern() {
  static const std::regex re(
      std::string(R"((^|[\s;&|'"])([A-Za-z_][A-Za-z0-9_]*(token|key|secret|password|passwd))=)") +
          k_value,
      std::regex::icase | std::regex::ECMAScript);
  return re;
}

const std::regex& bearer_pattern() {
  static const std::regex re(R"((bearer\s+)[^\s"']+)", std::regex::icase | std::regex::ECMAScript);
  return re;
}

const std::regex& url_password_pattern() {
  static const std::regex re(R"((://[^/\s:@]+:)[^@/\s]+@)");
  return re;
}

}  // namespace

std::string redact_secrets(std::string_view text) {
  if (text.size() > (1U << 20)) return "(not recorded: longer than 1 MiB)";
  std::string out(text);
  out = std::regex_replace(out, flag_pattern(), "$1$3***");
  out = std::regex_replace(out, env_pattern(), "$1$2=***");
  out = std::regex_replace(out, bearer_pattern(), "$1***");
  out = std::regex_replace(out, url_password_pattern(), "$1***@");
  return out;
}

}  // namespace kvprof
