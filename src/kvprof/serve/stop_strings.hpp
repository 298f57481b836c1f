// Stop strings as vLLM and llama-server apply them to generated text: the answer ends before the
// first stop string, which is not sent; text that may be the start of one is held back until the
// next piece shows whether it is.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "kvprof/util/error.hpp"

namespace kvprof::serve {

// At most this many stop strings, each at most this long (bytes): a request past either is
// refused, so the scan stays cheap whatever a client sends.
inline constexpr size_t k_max_stop_strings = 16;
inline constexpr size_t k_max_stop_string_bytes = 1024;

// The "stop" of a request body: a string or an array of strings (empty strings dropped); none
// when absent or null. Input error for another type or past the bounds above.
Expected<std::vector<std::string>> read_stop_strings(const nlohmann::json& request);

class StopScan {
 public:
  explicit StopScan(std::vector<std::string> stops) : m_stops(std::move(stops)) {}

  // The text that can go out now, `piece` added; once a stop string is found, the text before
  // it and stopped() is true (later pieces return nothing).
  std::string feed(std::string_view piece);
  // The text held back, sent when the answer ends without a stop string.
  std::string flush();
  [[nodiscard]] bool stopped() const { return m_stopped; }

 private:
  std::vector<std::string> m_stops;
  std::string m_held;
  bool m_stopped = false;
};

}  // namespace kvprof::serve
