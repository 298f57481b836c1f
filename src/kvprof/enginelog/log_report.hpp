// What an engine printed about its memory at startup (and at exit), as one EngineLogReport:
// per-device buffers with the exact line each came from, the settings and model facts the
// engine printed, and llama.cpp's memory breakdown table. Confidence: "reported by engine".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvprof/engines/engine.hpp"

namespace kvprof::enginelog {

// What a buffer holds. K/V halves are the parts of a KV cache when the engine prints them;
// they are never added to kv_cache in the totals.
enum class Component {
  weights,          // llama.cpp "model buffer", vLLM "Model loading took", SGLang "Load weight end"
  kv_cache,         // llama.cpp "KV buffer", vLLM "Available KV cache memory", TRT-LLM paged KV
  kv_cache_k,       // K half ("K (f16): 32.00 MiB", SGLang "K size")
  kv_cache_v,       // V half
  compute,          // llama.cpp compute buffers (graph scratch)
  output,           // llama.cpp logits/embeddings output buffer
  cuda_graph,       // CUDA graph pools (vLLM "Graph capturing ... took", SGLang capture)
  activation_peak,  // vLLM "torch peak memory increase" of the profile run
  non_torch,        // vLLM "non-torch forward increase memory"
  non_kv_total,     // vLLM "Total non KV cache memory"
};

// A size as the engine printed it: exact only to half a unit of the last printed digit.
struct PrintedSize {
  uint64_t bytes = 0;            // value x unit, rounded to the nearest byte
  uint64_t tolerance_bytes = 0;  // half a unit in the last printed digit (0.005 MiB for "%.2f MiB")
  std::string text;              // the figure as printed, e.g. "110.53 MiB"

  // Returns true when `other_bytes` is within the printed precision of this figure.
  [[nodiscard]] bool contains(uint64_t other_bytes) const;
};

// Where a figure came from: 1-based line number and the line as printed (ANSI colours removed).
struct LineRef {
  uint64_t line_no = 0;
  std::string text;
};

template <class T>
struct Printed {
  T value{};
  LineRef source;
};

struct MemoryFigure {
  Component component = Component::weights;
  std::string
      device;  // as the engine names it: "CUDA0", "CPU_Mapped", "CUDA_Host"; vLLM: "GPU" or "TP1"
  PrintedSize size;
  std::string cache_type;   // "f16", "q8_0", ... for K/V halves when printed
  uint32_t context = 0;     // llama.cpp: which llama_context (0-based) the buffer belongs to
  bool superseded = false;  // a later reservation of the same context replaced it (compute buffers)
  LineRef source;
};

// Settings the engine printed. Names follow llama.cpp; the source line shows the spelling used
// (n_ctx_seq is also read from the older n_ctx_per_seq).
struct PrintedSettings {
  std::optional<Printed<uint64_t>> n_ctx, n_ctx_seq, n_seq_max, n_batch, n_ubatch, n_slots;
  std::optional<Printed<std::string>> flash_attn;  // as printed: 0/1/enabled/disabled/auto
  std::optional<Printed<std::string>> kv_unified;  // "true"/"false"
  std::optional<Printed<uint64_t>> kv_cells, kv_layers;
  std::optional<Printed<std::string>> kv_seqs;  // "4" (older) or "4/4" (newer: n_seq_max/n_stream)
  std::optional<Printed<std::string>> type_k, type_v;
  std::optional<Printed<uint64_t>> offloaded_layers,
      offloadable_layers;  // "offloaded 33/33 layers"
  // vLLM / SGLang / TensorRT-LLM
  std::optional<Printed<uint64_t>> num_gpu_blocks, kv_cache_tokens, max_total_num_tokens;
  std::optional<Printed<uint64_t>>
      concurrency_request_tokens;  // the N of "for N tokens per request"
  std::optional<Printed<double>> max_concurrency;
  // CUDA graphs captured per GPU: the sum over the capture progress bars (vLLM "Capturing CUDA
  // graphs (decode, FULL): 100%|...| 35/35"), or SGLang's "Capture cuda graph bs [...]" list.
  std::optional<Printed<uint64_t>> cuda_graphs;
  std::optional<Printed<std::string>> enforce_eager;  // "true"/"false" (vLLM non-default args)
};

// One CUDA graph capture pass as the engine's progress bar names it (the largest total seen).
struct GraphCapture {
  std::string description;  // "decode, FULL", "mixed prefill-decode, PIECEWISE", "shapes"
  uint64_t graphs = 0;
};

// Model facts from llama.cpp's metadata dump and print_info lines.
struct ModelFacts {
  std::optional<Printed<std::string>> architecture, name, file_type_name, n_params;
  std::optional<Printed<uint64_t>> file_type, block_count, embedding_length, head_count,
      head_count_kv, context_length, n_vocab;
  std::optional<Printed<PrintedSize>> file_size;
};

// One row of llama.cpp's memory breakdown table (MiB integers, so exact only to +-0.5 MiB).
struct BreakdownRow {
  std::string device;                   // "CUDA0", "Host", "CPU_REPACK"
  std::string description;              // "RTX 4090" when printed
  std::optional<uint64_t> total_bytes;  // device rows only
  std::optional<uint64_t> free_bytes;   // device rows only
  uint64_t self_bytes = 0;              // model + context + compute
  uint64_t model_bytes = 0;
  uint64_t context_bytes = 0;
  uint64_t compute_bytes = 0;
  std::optional<int64_t> unaccounted_bytes;  // negative when llama.cpp's size_t subtraction wrapped
  LineRef source;
};

inline constexpr uint64_t k_breakdown_tolerance_bytes = 1ULL << 19;  // 0.5 MiB

// The modelled release a log's wording belongs to when it prints no version (vLLM V0's "# GPU
// blocks"), and why.
struct ReleaseFromWording {
  std::string release;  // as --engine-version takes it: "0.6", "0.7"
  std::string reason;   // "'# GPU blocks' is V0's wording before v0.6.5"
  LineRef source;
};

struct EngineLogReport {
  engines::Engine engine = engines::Engine::unknown;
  std::optional<Printed<std::string>> version;  // "6527 (abc1234)" for llama.cpp, "0.19.0" for vLLM
  std::optional<ReleaseFromWording> release_from_wording;  // where `version` is not printed
  std::vector<MemoryFigure> figures;                       // in log order
  std::vector<BreakdownRow> breakdown;  // the last memory breakdown table printed
  PrintedSettings settings;
  std::vector<GraphCapture> graph_captures;  // in the order first seen (at most 16)
  ModelFacts model;
  uint64_t n_lines = 0;               // lines read
  uint64_t n_recognised_lines = 0;    // lines that gave at least one figure, setting or fact
  uint64_t n_skipped_long_lines = 0;  // lines over the length bound, skipped
  bool truncated = false;             // the input went past the total bound; the rest was not read
};

// Per-device sums of the figures that are not superseded (K/V halves left out).
struct DeviceTotals {
  std::string device;
  uint64_t weights_bytes = 0;
  uint64_t kv_cache_bytes = 0;
  uint64_t compute_bytes = 0;
  uint64_t output_bytes = 0;
  uint64_t cuda_graph_bytes = 0;
};

// Returns the totals per device in order of first appearance.
std::vector<DeviceTotals> totals_by_device(const EngineLogReport& report);

// Returns true when the report holds at least one memory figure or breakdown row.
bool has_memory_figures(const EngineLogReport& report);

// Returns the component's name in JSON and tables, e.g. "kv_cache_k".
std::string_view component_name(Component component);

}  // namespace kvprof::enginelog
