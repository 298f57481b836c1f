// vLLM startup lines (V1 engine, v0.8 to v0.19 wording). The figures are per GPU; the device is
// the worker's rank tag ("(Worker_TP1 pid=..)" gives "TP1"), "GPU" for a single engine core.
//   "Model loading took 12.56 GiB memory and 38.07 seconds"           gpu_model_runner.py
//   "Memory profiling takes 17.55 seconds. Total non KV cache memory: 13.57GiB; torch peak memory
//    increase: 0.77GiB; non-torch forward increase memory: 0.25GiB; weights memory: 12.56GiB."
//                                                                      gpu_worker.py
//   older: "model weights take 14.99GiB; non_torch_memory takes 0.13GiB; PyTorch activation peak
//    memory takes 1.41GiB; the rest of the memory reserved for KV Cache is 54.75GiB."
//   "Available KV cache memory: 61.66 GiB"                             gpu_worker.py
//   "GPU KV cache size: 126,256 tokens"                                kv_cache_utils.py
//   "Maximum concurrency for 8,192 tokens per request: 15.41x"        kv_cache_utils.py
//   "Graph capturing finished in 4 secs, took 0.89 GiB"               gpu_model_runner.py
//   "Capturing CUDA graphs (decode, FULL): 100%|##| 35/35 [00:01<00:00, 22.27it/s]" (tqdm; older:
//    "Capturing CUDA graph shapes: 100%|##| 67/67 ...") gpu_model_runner.py
//   "non-default args: {..., 'enforce_eager': True}" / "with config: ... enforce_eager=True, ..."
//   "# GPU blocks: 7891" (v0; "# cuda blocks:" when named after the platform) /
//   "... num_gpu_blocks is: 7891" (v1 debug)
// vLLM's "GB" in older versions is GiB (bytes / 2^30); it is read as such.
#include <algorithm>
#include <string>

#include "kvprof/enginelog/line_reader.hpp"
#include "kvprof/enginelog/scan.hpp"
#include "kvprof/engines/vllm/vllm.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::engines {

using namespace kvprof::enginelog;  // NOLINT: the line splitter and scanner

namespace {

std::string vllm_rank_device(std::string_view text) {
  const size_t open = text.find('(');
  const size_t pid = text.find(" pid=");
  if (open == std::string_view::npos || pid == std::string_view::npos || pid < open) return "GPU";
  std::string_view tag = text.substr(open + 1, pid - open - 1);
  for (std::string_view p : {"Worker_", "EngineCore_", "VllmWorker-", "VllmWorker_"}) {
    if (starts_with(tag, p) && tag.size() > p.size()) return std::string(tag.substr(p.size()));
  }
  return "GPU";
}

bool has_figure(const EngineLogReport& report, Component component, std::string_view device) {
  return std::any_of(report.figures.begin(), report.figures.end(), [&](const MemoryFigure& f) {
    return f.component == component && f.device == device;
  });
}

// Reads the size after `key` and adds it as `component`; returns true when one was added.
bool figure_after(const LineInput& in, std::string_view key, Component component,
                  EngineLogReport& report, bool once_per_device = false) {
  Cursor c(in.text);
  if (!c.seek_past(key)) return false;
  auto size = c.read_size(GbMeans::gib);
  if (!size) return false;
  const auto device = vllm_rank_device(in.text);
  if (once_per_device && has_figure(report, component, device)) return true;
  MemoryFigure f;
  f.component = component;
  f.device = device;
  f.size = std::move(*size);
  f.source = ref(in);
  report.figures.push_back(std::move(f));
  return true;
}

bool uint_after(const LineInput& in, std::string_view key, std::optional<Printed<uint64_t>>& slot) {
  Cursor c(in.text);
  if (!c.seek_past(key)) return false;
  const auto v = c.read_uint(/*commas=*/true);
  if (!v) return false;
  keep_first(slot, *v, in);
  return true;
}

bool parse_profile_summary(const LineInput& in, EngineLogReport& report) {
  bool any = false;
  any |= figure_after(in, "Total non KV cache memory:", Component::non_kv_total, report);
  any |= figure_after(in, "torch peak memory increase:", Component::activation_peak, report);
  any |= figure_after(in, "non-torch forward increase memory:", Component::non_torch, report);
  any |= figure_after(in, "weights memory:", Component::weights, report, true);
  // Older wording of the same summary.
  any |= figure_after(in, "model weights take", Component::weights, report, true);
  any |= figure_after(in, "non_torch_memory takes", Component::non_torch, report);
  any |=
      figure_after(in, "PyTorch activation peak memory takes", Component::activation_peak, report);
  any |= figure_after(in, "reserved for KV Cache is", Component::kv_cache, report, true);
  return any;
}

bool parse_vllm_version(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("vLLM API server version ") && !c.seek_past("LLM engine (v")) return false;
  const auto v = c.read_token(")");
  if (v.empty() || v.size() > 64) return false;
  keep_first(report.version, std::string(v), in);
  return true;
}

constexpr size_t k_max_graph_captures = 16;
constexpr uint64_t k_max_graphs_per_capture = 1U << 20;

// One tqdm update of a capture pass: "<desc>: NN%|bar| done/total [...]"; `text` starts after
// "Capturing CUDA graph". Returns the pass's description and the graphs done.
std::optional<std::pair<std::string_view, uint64_t>> capture_update(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon > 200) return std::nullopt;
  std::string_view desc = trim_view(text.substr(0, colon));
  if (starts_with(desc, "s ")) desc = trim_view(desc.substr(2));  // "Capturing CUDA graphs (...)"
  if (desc.size() >= 2 && desc.front() == '(' && desc.back() == ')')
    desc = desc.substr(1, desc.size() - 2);
  const size_t bar_open = text.find('|', colon);
  if (bar_open == std::string_view::npos) return std::nullopt;
  const size_t bar_close = text.find('|', bar_open + 1);
  if (bar_close == std::string_view::npos) return std::nullopt;
  Cursor c(text.substr(bar_close + 1));
  const auto done = c.read_uint();
  if (!done || !c.eat("/")) return std::nullopt;
  const auto total = c.read_uint();
  if (!total || *done > *total || *total > k_max_graphs_per_capture) return std::nullopt;
  return std::pair{desc, *done};
}

// The capture progress bars of a line (several updates may share one line, split by '\r').
bool parse_graph_capture(const LineInput& in, EngineLogReport& report) {
  constexpr std::string_view k_key = "Capturing CUDA graph";
  std::string_view text = in.text;
  bool any = false;
  for (size_t at = text.find(k_key); at != std::string_view::npos; at = text.find(k_key)) {
    text = text.substr(at + k_key.size());
    const size_t next = text.find(k_key);
    const auto update = capture_update(text.substr(0, next));
    if (!update) continue;
    const auto& [desc, done] = *update;
    auto it = std::find_if(report.graph_captures.begin(), report.graph_captures.end(),
                           [&](const GraphCapture& g) { return g.description == desc; });
    if (it == report.graph_captures.end()) {
      if (report.graph_captures.size() >= k_max_graph_captures) continue;
      it = report.graph_captures.insert(report.graph_captures.end(),
                                        GraphCapture{std::string(desc), 0});
    }
    it->graphs = std::max(it->graphs, done);
    any = true;
  }
  if (!any) return false;
  uint64_t graphs = 0;
  for (const auto& g : report.graph_captures)
    graphs += g.graphs;
  report.settings.cuda_graphs = Printed<uint64_t>{graphs, ref(in)};
  return true;
}

// "'enforce_eager': True" (non-default args) or "enforce_eager=False" (the engine config line).
bool parse_enforce_eager(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("enforce_eager")) return false;
  c.eat("'");
  if (!c.eat(":") && !c.eat("=")) return false;
  const std::string_view value = c.read_token(",}");
  if (value != "True" && value != "False") return false;
  keep_first(report.settings.enforce_eager, std::string(value == "True" ? "true" : "false"), in);
  return true;
}

// Notes the release row the wording of line `in` belongs to; a `decisive` line (the block count's
// wording, which changed in v0.6.5) replaces a weaker hint.
void wording_of(EngineLogReport& report, const LineInput& in, const char* release,
                const char* reason, bool decisive) {
  auto& w = report.release_from_wording;
  if (w && !decisive) return;
  w = ReleaseFromWording{release, reason, ref(in)};
}

bool is_vllm_marker(std::string_view text) {
  return contains(text, "(EngineCore") || contains(text, "(APIServer pid=") ||
         contains(text, "vLLM API server") || contains(text, "(VllmWorker");
}

bool parse_vllm_line(const LineInput& in, EngineLogReport& report) {
  const std::string_view text = in.text;
  auto& s = report.settings;
  if (contains(text, "Capturing CUDA graph")) return parse_graph_capture(in, report);
  if (contains(text, "enforce_eager") && parse_enforce_eager(in, report)) return true;
  if (contains(text, "Model loading took"))
    return figure_after(in, "Model loading took", Component::weights, report);
  if (contains(text, "Loading model weights took")) {  // v0: "Loading model weights took 6.1138 GB"
    wording_of(report, in, "0.7", "'Loading model weights took' is V0's model runner (before v0.8)",
               false);
    return figure_after(in, "Loading model weights took", Component::weights, report);
  }
  if (contains(text, "Available KV cache memory:"))
    return figure_after(in, "Available KV cache memory:", Component::kv_cache, report);
  if (contains(text, "Graph capturing finished in"))
    return figure_after(in, ", took", Component::cuda_graph, report);
  if (contains(text, "GPU KV cache size:"))
    return uint_after(in, "GPU KV cache size:", s.kv_cache_tokens);
  if (contains(text, "# GPU blocks:")) {
    wording_of(report, in, "0.6", "'# GPU blocks' is V0's wording before v0.6.5", true);
    return uint_after(in, "# GPU blocks:", s.num_gpu_blocks);
  }
  // "# %s blocks" with the platform's name: "CUDA" (dispatch_key) or "cuda" (device_name).
  for (const char* key : {"# CUDA blocks:", "# cuda blocks:"}) {
    if (!contains(text, key)) continue;
    wording_of(report, in, "0.7", "'# CUDA blocks' is V0's wording of v0.6.5 - v0.7", true);
    return uint_after(in, key, s.num_gpu_blocks);
  }
  if (contains(text, "num_gpu_blocks is:"))
    return uint_after(in, "num_gpu_blocks is:", s.num_gpu_blocks);
  if (contains(text, "Maximum concurrency for ")) {
    Cursor c(text);
    c.seek_past("Maximum concurrency for ");
    const auto tokens = c.read_uint(/*commas=*/true);
    if (!tokens || !c.eat("tokens per request:")) return false;
    const auto x = c.read_decimal();
    if (!x || !c.eat("x")) return false;
    keep_first(s.concurrency_request_tokens, *tokens, in);
    keep_first(s.max_concurrency, *x, in);
    return true;
  }
  if (parse_profile_summary(in, report)) return true;
  return parse_vllm_version(in, report);
}

}  // namespace

enginelog::LineReader vllm_log_reader() {
  return {Engine::vllm, &parse_vllm_line, &is_vllm_marker};
}

}  // namespace kvprof::engines
