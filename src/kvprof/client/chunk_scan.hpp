// A fast path for the common OpenAI stream chunk: a strict, allocation-light JSON scanner that
// pulls out choices[0].text / delta content, finish_reason and usage. It declines (returns false)
// on anything it does not fully handle (escaped strings it must decode, "error" objects, odd
// types, any syntax doubt), and the caller then parses the chunk with nlohmann::json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvprof::client {

struct ScannedChunk {
  std::string text;  // choices[0].text plus delta content / reasoning_content / reasoning
  bool has_text_field = false;
  std::string finish_reason;
  bool has_usage = false;
  uint64_t prompt_tokens = 0;
  uint64_t completion_tokens = 0;
};

// Scans `json`; true and `out` filled when it is a well-formed chunk the fast path handles.
bool scan_chunk(std::string_view json, ScannedChunk& out);

}  // namespace kvprof::client
