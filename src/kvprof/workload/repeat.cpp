// Repeated requests (see repeat.hpp).
#include "kvprof/workload/repeat.hpp"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

namespace kvprof::workload {

RequestSpec repeat_of(const RequestSpec& request, uint32_t pass) {
  RequestSpec out = request;
  if (pass == 0) return out;
  if (request.prompt_format == PromptFormat::tokens) {
    auto& ids = out.prompt_token_ids;
    const size_t own_begin = std::min<size_t>(request.prefix_len, ids.size());
    const size_t own_len = ids.size() - own_begin;
    if (own_len < 2) return out;
    const auto first = ids.begin() + static_cast<std::ptrdiff_t>(own_begin);
    std::rotate(first, first + static_cast<std::ptrdiff_t>(pass % own_len), ids.end());
    return out;
  }
  // Text prompts: words separated by one space.
  std::vector<std::string_view> words;
  const std::string_view text = request.prompt_text;
  for (size_t pos = 0; pos <= text.size();) {
    const size_t space = std::min(text.find(' ', pos), text.size());
    words.push_back(text.substr(pos, space - pos));
    pos = space + 1;
  }
  const size_t own_begin = std::min<size_t>(request.prefix_len, words.size());
  const size_t own_len = words.size() - own_begin;
  if (own_len < 2) return out;
  const auto first = words.begin() + static_cast<std::ptrdiff_t>(own_begin);
  std::rotate(first, first + static_cast<std::ptrdiff_t>(pass % own_len), words.end());
  out.prompt_text.clear();
  out.prompt_text.reserve(text.size());
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out.prompt_text.push_back(' ');
    out.prompt_text.append(words[i]);
  }
  return out;
}

}  // namespace kvprof::workload
