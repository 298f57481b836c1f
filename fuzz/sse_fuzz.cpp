// libFuzzer target for the SSE parser and the OpenAI chunk parser: the input is split at a
// position taken from its first byte, fed in two pieces with a small event bound, and every
// event goes through parse_stream_event. Must never crash, hang or exceed the bound.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "kvprof/client/chunk_scan.hpp"
#include "kvprof/client/openai.hpp"
#include "kvprof/client/sse_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t cut = bytes.empty() ? 0 : data[0] % (bytes.size() + 1);
  kvprof::client::SseParser parser(4096);
  std::vector<kvprof::client::SseEvent> events;
  parser.feed(bytes.substr(0, cut), events);
  parser.feed(bytes.substr(cut), events);
  uint64_t tokens = 0;
  for (const auto& e : events) {
    if (e.data.size() > 4096) __builtin_trap();
    kvprof::client::ScannedChunk fast;
    (void)kvprof::client::scan_chunk(e.data, fast);  // the fast path alone must not crash either
    auto chunk = kvprof::client::parse_stream_event(e, tokens);
    if (chunk) tokens += chunk->n_tokens;
  }
  (void)parser.has_partial_event();
  return 0;
}
