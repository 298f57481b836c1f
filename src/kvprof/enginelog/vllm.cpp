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
//   "# GPU blocks: 7891" (v0; "# cuda blocks:" when named after the platform) /
//   "... num_gpu_blocks is: 7891" (v1 debug)
// vLLM's "GB" in older versions is GiB (bytes / 2^30); it is read as such.
#include <algorithm>
#include <string>

#include "kvprof/enginelog/engines.hpp"
#include "kvprof/enginelog/scan.hpp"

namespace kvprof::enginelog::detail {
namespace {

std::string rank_device(std::string_view text) {
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
  const auto device = rank_device(in.text);
  if (once_per_device && has_figure(report, component, device)) return true;
  MemoryFigure f;
  f.component = component;
  f.device = device;
  f.size = std::move(*size);
  f.source = ref(in);
  report.figures.push_back(std::move(f));
  return true;
}

template <class T>
void set_once(std::optional<Printed<T>>& slot, T value, const LineInput& in) {
  if (!slot) slot = Printed<T>{std::move(value), ref(in)};
}

bool uint_after(const LineInput& in, std::string_view key, std::optional<Printed<uint64_t>>& slot) {
  Cursor c(in.text);
  if (!c.seek_past(key)) return false;
  const auto v = c.read_uint(/*commas=*/true);
  if (!v) return false;
  set_once(slot, *v, in);
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

bool parse_version(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("vLLM API server version ") && !c.seek_past("LLM engine (v")) return false;
  const auto v = c.read_token(")");
  if (v.empty() || v.size() > 64) return false;
  set_once(report.version, std::string(v), in);
  return true;
}

}  // namespace

bool is_vllm_marker(std::string_view text) {
  return contains(text, "(EngineCore") || contains(text, "(APIServer pid=") ||
         contains(text, "vLLM API server") || contains(text, "(VllmWorker");
}

bool parse_vllm_line(const LineInput& in, EngineLogReport& report) {
  const std::string_view text = in.text;
  auto& s = report.settings;
  if (contains(text, "Model loading took"))
    return figure_after(in, "Model loading took", Component::weights, report);
  if (contains(text, "Loading model weights took"))  // v0: "Loading model weights took 6.1138 GB"
    return figure_after(in, "Loading model weights took", Component::weights, report);
  if (contains(text, "Available KV cache memory:"))
    return figure_after(in, "Available KV cache memory:", Component::kv_cache, report);
  if (contains(text, "Graph capturing finished in"))
    return figure_after(in, ", took", Component::cuda_graph, report);
  if (contains(text, "GPU KV cache size:"))
    return uint_after(in, "GPU KV cache size:", s.kv_cache_tokens);
  if (contains(text, "# GPU blocks:")) return uint_after(in, "# GPU blocks:", s.num_gpu_blocks);
  if (contains(text, "# cuda blocks:")) return uint_after(in, "# cuda blocks:", s.num_gpu_blocks);
  if (contains(text, "num_gpu_blocks is:"))
    return uint_after(in, "num_gpu_blocks is:", s.num_gpu_blocks);
  if (contains(text, "Maximum concurrency for ")) {
    Cursor c(text);
    c.seek_past("Maximum concurrency for ");
    const auto tokens = c.read_uint(/*commas=*/true);
    if (!tokens || !c.eat("tokens per request:")) return false;
    const auto x = c.read_decimal();
    if (!x || !c.eat("x")) return false;
    set_once(s.concurrency_request_tokens, *tokens, in);
    set_once(s.max_concurrency, *x, in);
    return true;
  }
  if (parse_profile_summary(in, report)) return true;
  return parse_version(in, report);
}

}  // namespace kvprof::enginelog::detail
