// libFuzzer target for the engine log parsers: the same bytes parsed whole and in two chunks
// (split where the first byte says) must give the same report; per-device totals never wrap.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kvprof/enginelog/parser.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/report/text/engine_log_report.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvprof::enginelog;
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  auto options = kvprof::engines::log_parse_options();
  options.max_line_bytes = 4096;
  options.max_total_bytes = 1 << 20;
  const auto whole = parse_engine_log(text, options);

  EngineLogParser chunked(options);
  const size_t split = size == 0 ? 0 : data[0] % (size + 1);
  chunked.feed(text.substr(0, split));
  chunked.feed(text.substr(split));
  const auto parts = chunked.finish();
  if (parts.n_lines != whole.n_lines || parts.figures.size() != whole.figures.size() ||
      parts.breakdown.size() != whole.breakdown.size() || parts.engine != whole.engine ||
      parts.n_recognised_lines != whole.n_recognised_lines) {
    std::abort();
  }
  for (const auto& f : whole.figures) {
    if (f.source.line_no == 0 || f.source.line_no > whole.n_lines ||
        f.source.text.size() > options.max_line_bytes) {
      std::abort();
    }
  }
  (void)totals_by_device(whole);
  using kvprof::engines::Engine;
  for (Engine e : {Engine::llamacpp, Engine::vllm, Engine::sglang, Engine::trtllm}) {
    options.engine = e;
    const auto one = parse_engine_log(text, options);
    (void)kvprof::report::text::engine_log_json(one);
    (void)kvprof::report::text::engine_log_text(one);
  }
  return 0;
}
