// SGLang startup lines (python/sglang/srt/model_executor/model_runner.py and the memory pool).
// The rank is the tag at the end of the "[2025-03-14 06:56:42 TP1]" prefix ("DP0 TP1" gives
// "DP0_TP1"); a line without one is "GPU". SGLang's "GB" is GiB (bytes / 2^30), read as such.
//   "Load weight end. type=..., dtype=..., avail mem=35.52 GB, mem usage=40.46 GB."
//   "KV Cache is allocated. #tokens: 2795207, K size: 53.31 GB, V size: 53.31 GB"
//   "Capture cuda graph end. Time elapsed: 11.35 s. mem usage=1.04 GB. avail mem=11.22 GB."
//   "max_total_num_tokens=2795207, chunked_prefill_size=..., max_prefill_tokens=..."
#include <string>

#include "kvprof/enginelog/line_reader.hpp"
#include "kvprof/enginelog/scan.hpp"
#include "kvprof/engines/sglang/sglang.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::engines {

using namespace kvprof::enginelog;  // NOLINT: the line splitter and scanner

namespace {

std::string sglang_rank_device(std::string_view text) {
  if (text.empty() || text.front() != '[') return "GPU";
  const size_t close = text.find(']');
  if (close == std::string_view::npos) return "GPU";
  const auto inside = text.substr(1, close - 1);
  // "[date time TP0]" or "[date time DP0 TP0]": the words after the date and time.
  size_t at = inside.find(' ');
  if (at != std::string_view::npos) at = inside.find(' ', at + 1);
  if (at == std::string_view::npos) return "GPU";
  std::string device(trim_view(inside.substr(at + 1)));
  for (auto& c : device) {
    if (c == ' ') c = '_';
  }
  return device.empty() || device.size() > 32 ? "GPU" : device;
}

bool parse_kv_allocated(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("KV Cache is allocated. #tokens:")) return false;
  const auto tokens = c.read_uint();
  if (!tokens || !c.eat(", K size:")) return false;
  auto k = c.read_size(GbMeans::gib);
  if (!k || !c.eat(", V size:")) return false;
  auto v = c.read_size(GbMeans::gib);
  if (!v) return false;
  PrintedSize total;
  if (__builtin_add_overflow(k->bytes, v->bytes, &total.bytes)) return false;
  total.tolerance_bytes = k->tolerance_bytes + v->tolerance_bytes;
  total.text = k->text + " + " + v->text;
  const std::string device = sglang_rank_device(in.text);
  add_figure(report, in, Component::kv_cache, device, std::move(total));
  add_figure(report, in, Component::kv_cache_k, device, std::move(*k));
  add_figure(report, in, Component::kv_cache_v, device, std::move(*v));
  if (!report.settings.kv_cache_tokens) {
    report.settings.kv_cache_tokens = Printed<uint64_t>{*tokens, ref(in)};
  }
  return true;
}

// "Capture cuda graph bs [1, 2, 4, 8, ...]": one graph per batch size.
bool parse_graph_batch_sizes(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  c.seek_past("Capture cuda graph bs [");
  const auto n = read_list_count(c);
  if (!n) return false;
  report.settings.cuda_graphs = Printed<uint64_t>{*n, ref(in)};
  return true;
}

bool is_sglang_marker(std::string_view text) {
  return contains(text, "sglang.srt") || contains(text, "sglang.launch_server") ||
         contains(text, "] Load weight begin.") || contains(text, "] Memory pool end.");
}

bool parse_sglang_line(const LineInput& in, EngineLogReport& report) {
  const std::string_view text = in.text;
  if (contains(text, "Load weight end."))
    return add_size_after(report, in, "mem usage=", Component::weights, sglang_rank_device(text));
  if (contains(text, "KV Cache is allocated.")) return parse_kv_allocated(in, report);
  if (contains(text, "Capture cuda graph bs [")) return parse_graph_batch_sizes(in, report);
  if (contains(text, "Capture cuda graph end."))
    return add_size_after(report, in, "mem usage=", Component::cuda_graph,
                          sglang_rank_device(text));
  if (contains(text, "max_total_num_tokens=")) {
    Cursor c(text);
    c.seek_past("max_total_num_tokens=");
    const auto n = c.read_uint();
    if (!n) return false;
    if (!report.settings.max_total_num_tokens) {
      report.settings.max_total_num_tokens = Printed<uint64_t>{*n, ref(in)};
    }
    return true;
  }
  return false;
}

}  // namespace

enginelog::LineReader sglang_log_reader() {
  return {Engine::sglang, &parse_sglang_line, &is_sglang_marker};
}

}  // namespace kvprof::engines
