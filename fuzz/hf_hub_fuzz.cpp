// libFuzzer target for what the Hugging Face Hub answers (hf_hub.hpp): the input's first line is
// a Content-Range header value, the rest a model.safetensors.index.json and then, after a NUL, a
// shard's first bytes as a Range answer would give them. Never a crash; every shard the index
// accepts is a plain file name; a size is only given for a well-formed range.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "kvprof/model/hf_hub.hpp"
#include "kvprof/model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto eol = text.find('\n');
  const std::string_view range = text.substr(0, eol);
  const std::string_view rest =
      eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
  const auto total = kvprof::model::parse_content_range_size(range);
  if (total && range.find('/') == std::string_view::npos) std::abort();
  const auto nul = rest.find('\0');
  const std::string_view index_text = rest.substr(0, nul);
  const auto index = kvprof::model::parse_safetensors_index(index_text, "fuzz");
  if (index) {
    for (const auto& [shard, names] : *index) {
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "..") std::abort();
    }
  } else if (index.error().message.empty()) {
    std::abort();
  }
  if (nul != std::string_view::npos) {
    const std::string_view prefix = rest.substr(nul + 1);
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(prefix.data()),
                                         prefix.size());
    (void)kvprof::model::parse_safetensors_header(bytes, total.value_or(prefix.size()));
  }
  (void)kvprof::model::is_hub_repo_id(range);
  return 0;
}
