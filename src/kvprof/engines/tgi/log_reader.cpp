// TGI startup lines (launcher/src/main.rs, the shard's flash_causal_lm.py warmup, the router's
// warmup). TGI prints no memory sizes, only what its warmup made of the memory:
//   "INFO text_generation_launcher: KV-cache blocks: 52719, size: 1"             (v2.4.0+)
//   "INFO text_generation_launcher: Cuda Graphs are enabled for sizes [32, 16, 8, 4, 2, 1]"
//   "INFO text_generation_router::server: router/src/server.rs:1651: Setting max batch total
//    tokens to 19056"                                           (the least over the shards)
//   "text-generation-launcher 2.0.4"                             (--version, or a banner)
#include <cctype>
#include <string>

#include "kvprof/enginelog/line_reader.hpp"
#include "kvprof/enginelog/scan.hpp"
#include "kvprof/engines/tgi/tgi.hpp"

namespace kvprof::engines {

using namespace kvprof::enginelog;  // NOLINT: the line splitter and scanner

namespace {

// The number after `key` in `text`; nullopt when absent.
std::optional<uint64_t> tgi_count_after(std::string_view text, std::string_view key) {
  Cursor c(text);
  if (!c.seek_past(key)) return std::nullopt;
  return c.read_uint();
}

// "Cuda Graphs are enabled for sizes [32, 16, 8, 4, 2, 1]": one graph per size.
bool parse_tgi_graph_sizes(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  c.seek_past("Cuda Graphs are enabled for sizes [");
  const auto n = read_list_count(c);
  return n && keep_first(report.settings.cuda_graphs, *n, in);
}

bool parse_tgi_version(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("text-generation-launcher ")) return false;
  const auto v = c.read_token();
  if (v.empty() || v.size() > 32 || !std::isdigit(static_cast<unsigned char>(v.front())))
    return false;
  return keep_first(report.version, std::string(v), in);
}

bool is_tgi_marker(std::string_view text) {
  return contains(text, "text_generation_launcher") || contains(text, "text_generation_router");
}

bool parse_tgi_line(const LineInput& in, EngineLogReport& report) {
  const std::string_view text = in.text;
  if (contains(text, "Setting max batch total tokens to ")) {
    const auto n = tgi_count_after(text, "Setting max batch total tokens to ");
    return n && keep_first(report.settings.kv_cache_tokens, *n, in);
  }
  if (contains(text, "KV-cache blocks: ")) {
    const auto n = tgi_count_after(text, "KV-cache blocks: ");
    return n && keep_first(report.settings.num_gpu_blocks, *n, in);
  }
  if (contains(text, "Cuda Graphs are enabled for sizes ["))
    return parse_tgi_graph_sizes(in, report);
  if (starts_with(text, "text-generation-launcher ")) return parse_tgi_version(in, report);
  return false;
}

}  // namespace

enginelog::LineReader tgi_log_reader() {
  return {Engine::tgi, &parse_tgi_line, &is_tgi_marker};
}

}  // namespace kvprof::engines
