// TensorRT-LLM startup lines, as its PyTorch backend (trtllm-serve, 1.x; KvCacheCreator in
// tensorrt_llm/_torch/pyexecutor) and its older C++ runtime (Triton's tensorrtllm_backend) print
// them. The device is "GPU": these lines name no rank.
//   "[TensorRT-LLM] TensorRT-LLM version: 1.1.0rc3"
//   "Memory used after loading model weights (inside torch) in memory usage profiling: 63.52 GiB"
//   "Memory dynamically allocated during inference (inside torch) in memory usage profiling: 0.85
//   GiB" "Memory used outside torch (e.g., NCCL and CUDA graphs) in memory usage profiling: 49.28
//   GiB"
//   "[MemUsageChange] Allocated 5.95 GiB for max tokens in paged KV cache (86720)."
//     (printed twice: first for the estimation pass, then for the cache that stays)
//   "Run generation only CUDA graph warmup for batch size=64, draft_len=0"
//   C++ runtime: "Loaded engine size: 3404 MiB", "[MemUsageChange] Allocated 2265.58 MiB for
//   execution context memory.", "Allocate 14575206400 bytes for k/v cache.", "Using 35584 total
//   tokens in paged KV cache, ...", "Max KV cache blocks per sequence: 65 [window size=2051],
//   tokens per block=32, primary blocks=116617, secondary blocks=0"
#include <set>
#include <string>
#include <utility>

#include "kvprof/enginelog/line_reader.hpp"
#include "kvprof/enginelog/scan.hpp"
#include "kvprof/engines/trtllm/trtllm.hpp"

namespace kvprof::engines {

using namespace kvprof::enginelog;  // NOLINT: the line splitter and scanner

namespace {

// The CUDA graphs warmed up, as (draft length, batch size), counted once however often the
// warm-up runs (at most 4,096).
struct TrtllmState {
  std::set<std::pair<uint64_t, uint64_t>> graphs;
};

constexpr size_t k_max_draft_lengths = 16;

constexpr std::string_view k_device = "GPU";

void set_tokens(EngineLogReport& report, const LineInput& in, uint64_t tokens) {
  report.settings.kv_cache_tokens = Printed<uint64_t>{tokens, ref(in)};  // the last one stays
}

// "[MemUsageChange] Allocated 5.95 GiB for max tokens in paged KV cache (86720)." The cache of
// the estimation pass is freed before the final one is allocated: a later line supersedes it.
bool parse_paged_kv(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("[MemUsageChange] Allocated")) return false;
  auto size = c.read_size(GbMeans::gib);
  if (!size || !c.eat("for max tokens in paged KV cache (")) return false;
  const auto tokens = c.read_uint();
  if (!tokens) return false;
  for (auto& f : report.figures) {
    if (f.component == Component::kv_cache) f.superseded = true;
  }
  add_figure(report, in, Component::kv_cache, std::string(k_device), std::move(*size));
  set_tokens(report, in, *tokens);
  return true;
}

// "Allocate 14575206400 bytes for k/v cache." (C++ runtime): exact bytes.
bool parse_kv_bytes(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("Allocate ")) return false;
  const auto bytes = c.read_uint();
  if (!bytes || !c.eat("bytes for k/v cache")) return false;
  add_figure(report, in, Component::kv_cache, std::string(k_device),
             PrintedSize{*bytes, 0, std::to_string(*bytes) + " bytes"});
  return true;
}

// "Run generation only CUDA graph warmup for batch size=64, draft_len=0": one graph per batch
// size and draft length; the warm-up runs again after the estimation pass, so sizes are counted
// once each.
bool parse_graph_warmup(const LineInput& in, EngineLogReport& report, TrtllmState& state) {
  Cursor c(in.text);
  if (!c.seek_past("CUDA graph warmup for batch size=")) return false;
  const auto batch = c.read_uint();
  if (!batch) return false;
  uint64_t draft_len = 0;
  if (c.eat(", draft_len=")) {
    const auto d = c.read_uint();
    if (!d) return false;
    draft_len = *d;
  }
  if (state.graphs.size() >= 4096) return true;
  state.graphs.insert({draft_len, *batch});
  uint64_t in_this_length = 0;
  for (const auto& [d, b] : state.graphs)
    in_this_length += d == draft_len ? 1 : 0;
  const std::string description = "draft_len=" + std::to_string(draft_len);
  bool found = false;
  for (auto& capture : report.graph_captures) {
    if (capture.description == description) {
      capture.graphs = in_this_length;
      found = true;
    }
  }
  if (!found && report.graph_captures.size() < k_max_draft_lengths) {
    report.graph_captures.push_back({description, in_this_length});
  }
  report.settings.cuda_graphs = Printed<uint64_t>{state.graphs.size(), ref(in)};
  return true;
}

bool parse_trtllm_version(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("TensorRT-LLM version:")) return false;
  c.skip_ws();
  const auto v = c.read_token();
  if (v.empty() || v.size() > 64) return false;
  if (!report.version) report.version = Printed<std::string>{std::string(v), ref(in)};
  return true;
}

// "Using 35584 total tokens in paged KV cache" (C++ runtime).
bool parse_total_tokens(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("Using ")) return false;
  const auto tokens = c.read_uint();
  if (!tokens || !c.eat("total tokens in paged KV cache")) return false;
  set_tokens(report, in, *tokens);
  return true;
}

// "..., tokens per block=32, primary blocks=116617, secondary blocks=0"
bool parse_blocks(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("primary blocks=")) return false;
  const auto blocks = c.read_uint();
  if (!blocks) return false;
  report.settings.num_gpu_blocks = Printed<uint64_t>{*blocks, ref(in)};
  return true;
}

bool is_trtllm_marker(std::string_view text) {
  return contains(text, "[TRT-LLM]") || contains(text, "[TensorRT-LLM]");
}

bool parse_trtllm_line(const LineInput& in, TrtllmState& state, EngineLogReport& report) {
  const std::string_view text = in.text;
  if (contains(text, "TensorRT-LLM version:")) return parse_trtllm_version(in, report);
  if (contains(text, "Memory used after loading model weights (inside torch)")) {
    return add_size_after(report, in, "memory usage profiling:", Component::weights,
                          std::string(k_device));
  }
  if (contains(text, "Memory dynamically allocated during inference (inside torch)")) {
    return add_size_after(report, in, "memory usage profiling:", Component::activation_peak,
                          std::string(k_device));
  }
  if (contains(text, "Memory used outside torch")) {
    return add_size_after(report, in, "memory usage profiling:", Component::non_torch,
                          std::string(k_device));
  }
  if (contains(text, "for max tokens in paged KV cache")) return parse_paged_kv(in, report);
  if (contains(text, "CUDA graph warmup for batch size=")) {
    return parse_graph_warmup(in, report, state);
  }
  if (contains(text, "Loaded engine size:")) {
    return add_size_after(report, in, "Loaded engine size:", Component::weights,
                          std::string(k_device));
  }
  if (contains(text, "for execution context memory")) {
    return add_size_after(report, in, "[MemUsageChange] Allocated", Component::compute,
                          std::string(k_device));
  }
  if (contains(text, "bytes for k/v cache")) return parse_kv_bytes(in, report);
  if (contains(text, "total tokens in paged KV cache")) return parse_total_tokens(in, report);
  if (contains(text, "primary blocks=")) return parse_blocks(in, report);
  return false;
}

}  // namespace

enginelog::LineReader trtllm_log_reader() {
  return {Engine::trtllm,
          [state = TrtllmState{}](const LineInput& in, EngineLogReport& report) mutable {
            return parse_trtllm_line(in, state, report);
          },
          &is_trtllm_marker};
}

}  // namespace kvprof::engines
