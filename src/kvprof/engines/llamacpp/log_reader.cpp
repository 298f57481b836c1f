// llama.cpp buffer lines: model, KV, compute and output buffers per device, the KV cache summary
// with its K/V split, and the offload count. Both generations of wording are read, from the
// format strings of llama.cpp's source (src/llama-model.cpp, src/llama-kv-cache.cpp,
// src/llama-context.cpp):
//   "%s: %12s model buffer size = %8.2f MiB"       (load_tensors; older llm_load_tensors:
//                                                   "%s: %10s buffer size = %8.2f MiB")
//   "%s: %10s KV buffer size = %8.2f MiB"          (llama_kv_cache_unified / llama_kv_cache)
//   "%s: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, V (%s): %7.2f
//   MiB"
//                                                  (older: "%2u seqs"; oldest: "KV self size = ")
//   "%s: %10s compute buffer size = %8.2f MiB"     (llama_context, later
//   graph_reserve/sched_reserve)
//   "%s: %10s  output buffer size = %8.2f MiB"
//   "%s: offloaded %d/%d layers to GPU"
// A line may carry a prefix (timestamps, log level) before the function name; keys are found
// anywhere in the line. Settings, model facts and the breakdown table: llamacpp_info.cpp.
#include <algorithm>
#include <string>

#include "kvprof/enginelog/line_reader.hpp"
#include "kvprof/enginelog/scan.hpp"
#include "kvprof/engines/llamacpp/llamacpp.hpp"
#include "kvprof/engines/llamacpp/log_info.hpp"

namespace kvprof::engines {

using namespace kvprof::enginelog;  // NOLINT: the line splitter and scanner

namespace {

void add_figure(EngineLogReport& report, const LineInput& in, Component component,
                std::string_view device, PrintedSize size, uint32_t context,
                std::string_view cache_type = {}) {
  MemoryFigure f;
  f.component = component;
  f.device = std::string(device);
  f.size = std::move(size);
  f.cache_type = std::string(cache_type);
  f.context = context;
  f.source = ref(in);
  report.figures.push_back(std::move(f));
}

// The device named right before `key_pos` ("   CUDA0 KV buffer size"), or "" when the word
// there is the function name ("load_tensors:") or a tag like "[fp8]".
std::string_view device_before(std::string_view text, size_t key_pos) {
  const auto word = word_before(text, key_pos);
  if (word.empty() || word.back() == ':' || word.front() == '[') return {};
  return word;
}

struct BufferKey {
  std::string_view key;
  Component component;
};

// "<device> <kind> buffer size = <size>": returns true when one was read.
bool parse_buffer_line(const LineInput& in, LlamaCppState& state, EngineLogReport& report) {
  static constexpr BufferKey k_keys[] = {
      {" model buffer size =", Component::weights},
      {" KV buffer size =", Component::kv_cache},
      {" compute buffer size =", Component::compute},
      {" output buffer size =", Component::output},
  };
  const std::string_view text = in.text;
  for (const auto& k : k_keys) {
    const size_t pos = text.find(k.key);
    if (pos == std::string_view::npos) continue;
    Cursor c(text.substr(pos + k.key.size()));
    auto size = c.read_size();
    if (!size) return false;
    const auto device = device_before(text, pos);
    if (k.component == Component::compute) {
      // A new run of compute lines is a new reservation of this context's scheduler: it
      // replaces the figures of the previous one (sched_reserve prints again after changes).
      if (!state.compute_block) {
        for (auto& f : report.figures) {
          if (f.component == Component::compute && f.context == state.context) f.superseded = true;
        }
      }
      add_figure(report, in, k.component, device, std::move(*size), state.context);
      state.compute_block = true;
      return true;
    }
    const uint32_t context = k.component == Component::weights ? 0 : state.context;
    add_figure(report, in, k.component, device, std::move(*size), context);
    state.compute_block = false;
    return true;
  }
  // Older model loading: "llm_load_tensors:      CUDA0 buffer size =  3577.56 MiB".
  const size_t pos = text.find(" buffer size =");
  if (pos != std::string_view::npos && contains(text.substr(0, pos), "load_tensors:")) {
    Cursor c(text.substr(pos + 14));
    auto size = c.read_size();
    if (!size) return false;
    add_figure(report, in, Component::weights, device_before(text, pos), std::move(*size), 0);
    state.compute_block = false;
    return true;
  }
  return false;
}

// "<func>: size = 64.00 MiB (8192 cells, 8 layers, 4 seqs), K (f16): 32.00 MiB, V (f16): ..."
// and the oldest "KV self size = 160.00 MiB, K (f16): 80.00 MiB, V (f16): 80.00 MiB".
bool parse_kv_summary(const LineInput& in, LlamaCppState& state, EngineLogReport& report) {
  const std::string_view text = in.text;
  const bool self_size = contains(text, "KV self size =");
  if (!self_size && !(contains(text, "kv_cache") && contains(text, ": size ="))) return false;
  Cursor c(text);
  c.seek_past(self_size ? "KV self size =" : ": size =");
  if (!c.read_size()) return false;
  auto& s = report.settings;
  uint64_t cells_v = 0;
  uint64_t layers_v = 0;
  std::string_view seqs_v;
  if (!self_size) {
    if (!c.eat("(")) return false;
    const auto cells = c.read_uint();
    if (!cells || !c.eat("cells,")) return false;
    const auto layers = c.read_uint();
    if (!layers || !c.eat("layers,")) return false;
    const auto seqs = c.read_token(")");
    if (seqs.empty() || !c.eat("seqs),")) return false;
    cells_v = *cells;
    layers_v = *layers;
    seqs_v = seqs;
  } else if (!c.eat(",")) {
    return false;
  }
  std::string_view types[2];
  PrintedSize sizes[2];
  for (int i = 0; i < 2; ++i) {
    if (!c.eat(i == 0 ? "K (" : ", V (")) return false;
    types[i] = c.read_token(")");
    if (!c.eat("):")) return false;
    auto size = c.read_size();
    if (!size) return false;
    sizes[i] = std::move(*size);
  }
  // Nothing is kept unless the whole line read. The first cache printed is the main one (an
  // iSWA model prints its SWA cache second).
  if (!self_size) {
    if (!s.kv_cells) s.kv_cells = Printed<uint64_t>{cells_v, ref(in)};
    if (!s.kv_layers) s.kv_layers = Printed<uint64_t>{layers_v, ref(in)};
    if (!s.kv_seqs) s.kv_seqs = Printed<std::string>{std::string(seqs_v), ref(in)};
  }
  add_figure(report, in, Component::kv_cache_k, "", std::move(sizes[0]), state.context, types[0]);
  add_figure(report, in, Component::kv_cache_v, "", std::move(sizes[1]), state.context, types[1]);
  if (!s.type_k) s.type_k = Printed<std::string>{std::string(types[0]), ref(in)};
  if (!s.type_v) s.type_v = Printed<std::string>{std::string(types[1]), ref(in)};
  return true;
}

// "load_tensors: offloaded 33/33 layers to GPU"
bool parse_offloaded(const LineInput& in, EngineLogReport& report) {
  Cursor c(in.text);
  if (!c.seek_past("offloaded ")) return false;
  const auto done = c.read_uint();
  if (!done || !c.eat("/")) return false;
  const auto total = c.read_uint();
  if (!total || !c.eat("layers to GPU")) return false;
  report.settings.offloaded_layers = Printed<uint64_t>{*done, ref(in)};
  report.settings.offloadable_layers = Printed<uint64_t>{*total, ref(in)};
  return true;
}

bool is_llamacpp_marker(std::string_view text) {
  static constexpr std::string_view k_marks[] = {
      "llama_model_loader:", "load_tensors:",        "llama_context:",  "print_info:",
      "llama_kv_cache",      "llm_load_print_meta:", "ggml_cuda_init:", "llama_model_load"};
  return std::any_of(std::begin(k_marks), std::end(k_marks),
                     [&](std::string_view m) { return contains(text, m); });
}

bool parse_llamacpp_line(const LineInput& in, LlamaCppState& state, EngineLogReport& report) {
  const std::string_view text = in.text;
  if (contains(text, "constructing llama_context")) {
    if (state.seen_context) ++state.context;
    state.seen_context = true;
    state.compute_block = false;
    return false;
  }
  if (parse_breakdown_line(in, state, report)) return true;
  if (parse_buffer_line(in, state, report)) return true;
  // Any other line of the context or scheduler ends a run of compute buffer lines.
  if (contains(text, "llama_context:") || contains(text, "sched_reserve:") ||
      contains(text, "graph_reserve:") || contains(text, "llama_new_context_with_model:") ||
      contains(text, "llama_init_from_model:") || contains(text, "llama_kv_cache")) {
    state.compute_block = false;
  }
  if (parse_kv_summary(in, state, report)) return true;
  if (parse_offloaded(in, report)) return true;
  return parse_llamacpp_info_line(in, report);
}

}  // namespace

enginelog::LineReader llamacpp_log_reader() {
  return {Engine::llamacpp,
          [state = LlamaCppState{}](const LineInput& in, EngineLogReport& report) mutable {
            return parse_llamacpp_line(in, state, report);
          },
          &is_llamacpp_marker};
}

}  // namespace kvprof::engines
