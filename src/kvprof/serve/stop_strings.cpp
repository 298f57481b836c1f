// Stop strings (see stop_strings.hpp).
#include "kvprof/serve/stop_strings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kvprof::serve {

Expected<std::vector<std::string>> read_stop_strings(const nlohmann::json& request) {
  std::vector<std::string> stops;
  const auto it = request.find("stop");
  if (it == request.end() || it->is_null()) return stops;
  const auto add = [&](const nlohmann::json& value) -> Expected<void> {
    if (!value.is_string()) {
      return fail(ErrorKind::input, "'stop' must be a string or a list of strings");
    }
    const auto& text = value.get_ref<const std::string&>();
    if (text.size() > k_max_stop_string_bytes) {
      return fail(ErrorKind::input,
                  fmt::format("a stop string is longer than {} bytes", k_max_stop_string_bytes));
    }
    if (!text.empty()) stops.push_back(text);
    return {};
  };
  if (it->is_array()) {
    if (it->size() > k_max_stop_strings) {
      return fail(ErrorKind::input,
                  fmt::format("'stop' holds more than {} strings", k_max_stop_strings));
    }
    for (const auto& value : *it) {
      if (auto ok = add(value); !ok) return std::unexpected(ok.error());
    }
  } else if (auto ok = add(*it); !ok) {
    return std::unexpected(ok.error());
  }
  return stops;
}

std::string StopScan::feed(std::string_view piece) {
  if (m_stopped) return {};
  if (m_stops.empty()) return std::string(piece);  // nothing to hold back
  m_held.append(piece);
  // Where the first stop string in the text held starts.
  size_t cut = std::string::npos;
  for (const auto& stop : m_stops) {
    cut = std::min(cut, m_held.find(stop));
  }
  if (cut != std::string::npos) {
    m_stopped = true;
    std::string out = m_held.substr(0, cut);
    m_held.clear();
    return out;
  }
  // Hold back the longest end of the text that is the start of a stop string.
  size_t keep = 0;
  for (const auto& stop : m_stops) {
    for (size_t k = std::min(stop.size() - 1, m_held.size()); k > keep; --k) {
      if (std::string_view(m_held).substr(m_held.size() - k) ==
          std::string_view(stop).substr(0, k)) {
        keep = k;
        break;
      }
    }
  }
  std::string out = m_held.substr(0, m_held.size() - keep);
  m_held.erase(0, m_held.size() - keep);
  return out;
}

std::string StopScan::flush() {
  std::string out = std::move(m_held);
  m_held.clear();
  return out;
}

}  // namespace kvprof::serve
