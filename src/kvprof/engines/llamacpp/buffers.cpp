// llama.cpp's buffers as libllama sizes them (see buffers.hpp). The figures were checked
// against llama.cpp 0.5 (node-llama-cpp 3.22.1) through llama_get_memory_breakdown, by
// tests/estimate_llamacpp_real_test.cpp.
#include "kvprof/engines/llamacpp/buffers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <optional>
#include <string_view>

#include "kvprof/engines/llamacpp/graph.hpp"
#include "kvprof/engines/llamacpp/tensor_overrides.hpp"
#include "kvprof/estimate/kv.hpp"
#include "kvprof/estimate/tensors.hpp"
#include "kvprof/model/gguf.hpp"

namespace kvprof::engines {

using namespace kvprof::estimate;  // NOLINT: the planner below every engine

namespace {

using model::AttentionKind;
using model::ModelSpec;

constexpr uint32_t k_type_q4_0 = 2;
constexpr uint32_t k_type_q4_k = 12;
constexpr uint32_t k_type_iq4_nl = 20;
constexpr uint32_t k_type_mxfp4 = 39;
constexpr uint64_t k_mxfp4_block_elements = 32, k_mxfp4_block_bytes = 17;
constexpr uint32_t k_type_q8_0 = 8;
constexpr uint64_t k_q8_0_block_elements = 32, k_q8_0_block_bytes = 34;
// libllama, ggml and the vocabulary tables: what the process grows by besides the buffers,
// measured on llama.cpp 0.5 (CPU build) with dummy vocabularies of 1k to 152k tokens.
constexpr uint64_t k_runtime_base_bytes = 9728ULL << 10;
constexpr uint64_t k_runtime_bytes_per_vocab_token = 180;

uint64_t pad_to(uint64_t n, uint64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// Where a tensor belongs: token embeddings (always host), a repeating layer, or the output side.
enum class Slot : uint8_t { token_embd, layer, output };

struct PlacedTensor {
  std::string name;  // the GGUF's ("blk.3.ffn_up_exps.weight"), what -ot patterns match
  Slot slot = Slot::output;
  int32_t layer = -1;
  uint32_t type = k_ggml_type_f16;
  uint64_t rows = 1;  // ne[1]
  uint32_t dims = 1;
  uint64_t bytes = 0;
  uint64_t offset = 0;
};

std::optional<uint32_t> type_id(std::string_view name) {
  for (uint32_t id = 0; id < 64; ++id) {
    const auto n = model::ggml_type_name(id);
    if (n && *n == name) return id;
  }
  return std::nullopt;
}

// "blk.12.attn_q.weight" -> 12.
std::optional<int32_t> block_index(std::string_view name) {
  if (!name.starts_with("blk.")) return std::nullopt;
  name.remove_prefix(4);
  int32_t v = 0;
  const auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), v);
  if (ec != std::errc() || p == name.data()) return std::nullopt;
  return v;
}

// The GGUF's own tensors, or (for a model known by its dimensions) the file llama.cpp's converter
// writes from its checkpoint: 16-bit matrices (MXFP4 experts where the checkpoint's are, as
// gpt-oss's: convert_hf_to_gguf repacks them) and f32 norms, laid out one after another.
std::vector<PlacedTensor> placed_tensors(const ModelSpec& m) {
  std::vector<PlacedTensor> out;
  if (!m.tensors.empty()) {
    for (const auto& t : m.tensors) {
      PlacedTensor p;
      p.name = t.name;
      if (t.name.starts_with("token_embd.")) {
        p.slot = Slot::token_embd;
      } else if (const auto il = block_index(t.name)) {
        p.slot = Slot::layer;
        p.layer = *il;
      }
      p.type = type_id(t.type_name).value_or(k_ggml_type_f16);
      p.dims = static_cast<uint32_t>(t.shape.size());
      p.rows = t.shape.size() >= 2 ? t.shape[1] : 1;
      p.bytes = t.bytes;
      p.offset = t.offset_bytes;
      out.push_back(p);
    }
    return out;
  }
  uint64_t offset = 0;
  for (const auto& t : decoder_tensors(m)) {
    if (t.role == TensorRole::vision || t.role == TensorRole::mtp) continue;
    PlacedTensor p;
    p.slot = t.role == TensorRole::embedding ? Slot::token_embd
             : t.layer >= 0                  ? Slot::layer
                                             : Slot::output;
    p.layer = t.layer;
    const bool matrix = t.cols > 1;
    const bool mxfp4_checkpoint = m.quant.method == model::QuantMethod::mxfp4;
    const bool mxfp4 = matrix && t.role == TensorRole::expert && mxfp4_checkpoint &&
                       t.cols % k_mxfp4_block_elements == 0;
    // -q MXFP4_MOE of such a checkpoint: llama-quantize makes every other matrix Q8_0.
    const bool q8_0 = matrix && !mxfp4 && mxfp4_checkpoint && m.quant.format == "MXFP4_MOE" &&
                      t.cols % k_q8_0_block_elements == 0;
    p.type = mxfp4 ? k_type_mxfp4 : q8_0 ? k_type_q8_0 : matrix ? k_ggml_type_f16 : k_ggml_type_f32;
    p.dims = matrix ? 2 : 1;
    p.rows = t.rows;
    p.bytes = mxfp4    ? t.elements() / k_mxfp4_block_elements * k_mxfp4_block_bytes
              : q8_0   ? t.elements() / k_q8_0_block_elements * k_q8_0_block_bytes
              : matrix ? t.elements() * 2
                       : t.elements() * 4;
    p.name = t.layer >= 0 ? fmt::format("blk.{}.{}", t.layer, t.name) : t.name;
    // Routed experts under the names llama.cpp gives them (what --cpu-moe and -ot match): the
    // gated up projection is two tensors there, ffn_gate_exps and ffn_up_exps.
    if (t.role == estimate::TensorRole::expert && matrix) {
      const bool down = t.name.ends_with("down_proj");
      const bool gated = !down && m.mlp_matrices >= 3;
      std::vector<std::string_view> parts;
      if (down) {
        parts = {"down"};
      } else if (gated) {
        parts = {"gate", "up"};
      } else {
        parts = {"up"};
      }
      for (const std::string_view part : parts) {
        PlacedTensor e = p;
        e.name = fmt::format("blk.{}.ffn_{}_exps.weight", t.layer, part);
        e.rows = gated ? p.rows / 2 : p.rows;
        e.bytes = gated ? p.bytes / 2 : p.bytes;
        e.offset = offset;
        offset += pad_to(e.bytes, 32);
        out.push_back(std::move(e));
      }
      continue;
    }
    p.offset = offset;
    offset += pad_to(p.bytes, 32);
    out.push_back(p);
  }
  return out;
}

// Whether the CPU backend of the release repacks `t` (x86 AVX2, rows in eights).
bool repacked(const PlacedTensor& t, const LlamaCppSettings& s) {
  if (!s.cpu_repack || t.slot == Slot::token_embd || t.dims < 2 || t.rows % 8 != 0) return false;
  const LlamaCppReleaseRules& r = *s.release;
  return (t.type == k_type_q4_0 && r.repack_q4_0) || (t.type == k_type_q4_k && r.repack_q4_k) ||
         (t.type == k_type_iq4_nl && r.repack_iq4_nl) || (t.type == k_type_mxfp4 && r.repack_mxfp4);
}

// The GPU of layer `il` (-1: host).
int32_t gpu_of(const LlamaCppPlan& plan, int64_t il) {
  return il >= 0 && static_cast<size_t>(il) < plan.layer_gpu.size()
             ? plan.layer_gpu[static_cast<size_t>(il)]
             : -1;
}

void place_weights(const ModelSpec& m, const LlamaCppSettings& s, LlamaCppPlan& plan) {
  const auto tensors = placed_tensors(m);
  const TensorPlacement overrides(s.tensor_overrides);
  uint64_t span_begin = std::numeric_limits<uint64_t>::max();
  uint64_t span_end = 0;
  uint64_t host_bytes = 0;
  bool has_output_matrix = false;
  uint64_t token_embd_bytes = 0;
  for (const auto& t : tensors) {
    if (t.slot == Slot::token_embd) token_embd_bytes += t.bytes;
    if (t.slot == Slot::output && t.dims >= 2) has_output_matrix = true;
    int32_t gpu = t.slot == Slot::layer    ? gpu_of(plan, t.layer)
                  : t.slot == Slot::output ? plan.output_gpu
                                           : -1;
    // -ot / --cpu-moe: the first override the name matches decides (a GPU this plan has).
    if (const auto over = overrides.device_of(t.name)) {
      gpu = *over >= 0 && static_cast<size_t>(*over) < plan.gpus.size() ? *over : -1;
      if (gpu < 0) plan.overridden_host_bytes += t.bytes;
      // An override to the CPU takes the CPU's extra buffer types too (the repacked one).
      std::string type = model::ggml_type_name(t.type).value_or("?");
      std::transform(type.begin(), type.end(), type.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      plan.override_lines.push_back(fmt::format(
          "tensor {} ({} MiB {}) buffer type overridden to {}", t.name, t.bytes >> 20, type,
          gpu >= 0         ? fmt::format("CUDA{}", gpu)
          : repacked(t, s) ? std::string(s.release->log_repack_buffer)
                           : "CPU"));
    }
    if (gpu >= 0) {
      plan.model_gpu_bytes += t.bytes;
      plan.gpus[static_cast<size_t>(gpu)].model_bytes += t.bytes;
      continue;
    }
    plan.model_host_resident_bytes += t.bytes;
    if (t.dims >= 2 && t.slot != Slot::token_embd && !repacked(t, s)) {
      uint64_t& largest = t.slot == Slot::output ? plan.host_output_matrix_bytes
                          : t.name.find("ffn_") != std::string::npos
                              ? plan.host_ffn_matrix_bytes
                              : plan.host_attention_matrix_bytes;
      largest = std::max(largest, t.bytes);
    }
    if (repacked(t, s)) {
      plan.model_repack_bytes += t.bytes;
      continue;
    }
    host_bytes += t.bytes;
    span_begin = std::min(span_begin, t.offset);
    span_end = std::max(span_end, t.offset + t.bytes);
  }
  // Tied embeddings: the output layer multiplies by the token embeddings (on the GPU a copy).
  if (!plan.output_on_gpu && !has_output_matrix) plan.host_output_matrix_bytes = token_embd_bytes;
  if (plan.output_on_gpu && !has_output_matrix) {
    plan.model_gpu_bytes += token_embd_bytes;
    plan.gpus[static_cast<size_t>(plan.output_gpu)].model_bytes += token_embd_bytes;
  }
  if (s.use_mmap) {
    plan.model_mapped_bytes = span_end > span_begin ? span_end - span_begin : 0;
  } else {
    plan.model_host_bytes = host_bytes;
  }
  plan.model_host_resident_bytes += plan.model_repack_bytes;
}

bool is_attention(AttentionKind k) {
  return k == AttentionKind::full || k == AttentionKind::sliding || k == AttentionKind::chunked ||
         k == AttentionKind::mla;
}

// K bytes of one cell of an attention layer of kind `kind`.
uint64_t cell_k_bytes(const ModelSpec& m, AttentionKind kind, const LlamaCppSettings& s) {
  if (kind == AttentionKind::mla) {
    // llama.cpp caches the latent and the rope part as K; V is a view of it.
    return ggml_row_bytes(s.type_k, uint64_t{m.mla.kv_lora_rank} + m.mla.qk_rope_head_dim);
  }
  return ggml_row_bytes(s.type_k, uint64_t{m.head_dim} * m.n_head_kv);
}

// K + V bytes of one cell of an attention layer of kind `kind`.
uint64_t cell_bytes(const ModelSpec& m, AttentionKind kind, const LlamaCppSettings& s) {
  if (kind == AttentionKind::mla) return cell_k_bytes(m, kind, s);
  return cell_k_bytes(m, kind, s) + ggml_row_bytes(s.type_v, uint64_t{m.head_dim} * m.n_head_kv);
}

// KV streams: one per sequence unless the cache is unified (or the release has no streams).
uint32_t kv_streams(const LlamaCppSettings& s) {
  return s.kv_unified || !s.release->kv_streams ? 1 : std::max(1U, s.n_seq_max);
}

void place_kv(const ModelSpec& m, const LlamaCppSettings& s, LlamaCppPlan& plan) {
  const LlamaCppReleaseRules& r = *s.release;
  const uint32_t n_seq = std::max(1U, s.n_seq_max);
  const uint32_t n_stream = kv_streams(s);
  const uint32_t pad = s.flash_attn ? r.kv_pad_cells_fa : r.kv_pad_cells_no_fa;
  // One stream: the whole context padded; a stream per slot: each slot's share.
  const uint32_t cells_per_stream = n_stream == 1
                                        ? static_cast<uint32_t>(pad_to(s.n_ctx, pad))
                                        : static_cast<uint32_t>(pad_to(s.n_ctx / n_stream, pad));
  plan.n_ctx_seq = n_stream == 1 ? s.n_ctx : s.n_ctx / n_stream;
  plan.kv_cells = cells_per_stream * n_stream;
  uint32_t window = 0;
  for (const auto& l : m.layers) {
    if (l.attention == AttentionKind::sliding || l.attention == AttentionKind::chunked)
      window = std::max(window, l.window_tokens);
  }
  uint32_t swa_per_stream = cells_per_stream;
  if (!s.swa_full && r.swa_cache && window > 0) {
    const uint64_t want = uint64_t{window} * (n_stream == 1 ? n_seq : 1) + plan.n_ubatch;
    // Padded like the cache until b6975, to 256 since.
    const uint32_t swa_pad = r.kv_pad_cells_fa == 1 ? 1 : pad;
    swa_per_stream =
        static_cast<uint32_t>(std::min<uint64_t>(cells_per_stream, pad_to(want, swa_pad)));
  }
  plan.kv_cells_swa = swa_per_stream * n_stream;
  // Recurrent layers keep one state per sequence (f32 conv + ssm state).
  const KvLayout layout = kv_layout(m, 1, 1, 0, KvCacheDtype::f32, model::DType::f32);
  for (uint32_t il = 0; il < m.n_layer && il < m.layers.size(); ++il) {
    const AttentionKind kind = m.layers[il].attention;
    uint64_t bytes = 0;
    if (is_attention(kind)) {
      const bool local = (kind == AttentionKind::sliding || kind == AttentionKind::chunked) &&
                         m.layers[il].window_tokens > 0;
      const uint64_t per_cell = cell_bytes(m, kind, s);
      const uint64_t cells = local ? plan.kv_cells_swa : plan.kv_cells;
      bytes = per_cell * cells;
      plan.kv_k_bytes += cell_k_bytes(m, kind, s) * cells;
      plan.kv_v_bytes += (per_cell - cell_k_bytes(m, kind, s)) * cells;
      if (!local) plan.kv_bytes_per_cell += per_cell;
    } else {
      for (const auto& l : layout.layers) {
        if (l.layer == il) bytes = l.state_bytes * n_seq;
      }
    }
    if (const int32_t gpu = gpu_of(plan, il); gpu >= 0) {
      plan.kv.gpu_bytes += bytes;
      plan.gpus[static_cast<size_t>(gpu)].kv_bytes += bytes;
    } else {
      plan.kv.host_bytes += bytes;
    }
  }
}

// The outputs the worst-case graph is reserved for: llama-server's one per slot (releases that
// limit them), else every token of the ubatch (libllama's default n_outputs_max = n_batch).
uint32_t reserved_outputs(const LlamaCppSettings& s, uint32_t n_ubatch) {
  if (s.outputs_per_slot && s.release->server_outputs_per_slot)
    return std::min(n_ubatch, std::max(1U, s.n_seq_max));
  return n_ubatch;
}

// The tokens of the reserved graph: the ubatch, made a multiple of the slots as the release
// does (llama_context::graph_reserve).
uint32_t reserved_tokens(const LlamaCppSettings& s, uint32_t n_ubatch) {
  using Rounding = LlamaCppReleaseRules::Rounding;
  const uint32_t n_seq = std::max(1U, s.n_seq_max);
  if (n_ubatch % n_seq == 0) return n_ubatch;
  switch (s.release->reserve_rounding) {
    case Rounding::none:
      return n_ubatch;
    case Rounding::down:
      return std::max(n_seq, n_ubatch / n_seq * n_seq);
    case Rounding::up:
      return (n_ubatch + n_seq - 1) / n_seq * n_seq;
  }
  return n_ubatch;
}

struct Stage {
  const char* name;
  uint64_t bytes_per_token;
  uint64_t fixed_bytes = 0;  // besides: what does not grow with the tokens (the outputs' logits)
};

// ggml's scheduler with a CUDA backend (op offload, on unless --no-op-offload): a product with
// a weight in host memory and a batch of 32 tokens or more runs on the first GPU, the weight
// copied into its compute buffer for that op alone (each such weight starts a split of its own,
// so one copy is alive at a time). That GPU's buffer becomes the largest of its own stages and
// of each stage with its largest host weight; the other stage sizes are bytes of the reserved
// graph. True when the output layer's product moved to the GPU.
bool add_op_offload(const LlamaCppSettings& s, LlamaCppPlan& plan, uint64_t attention_bytes,
                    uint64_t ffn_bytes, uint64_t logits_bytes, uint64_t n_outputs) {
  constexpr uint64_t k_min_offload_batch = 32;  // the CUDA backend's op_offload_min_batch_size
  if (!s.has_gpu || !s.op_offload || plan.gpus.empty() || plan.n_ubatch < k_min_offload_batch) {
    return false;
  }
  const bool output_moves = plan.host_output_matrix_bytes > 0 && n_outputs >= k_min_offload_batch;
  LlamaCppDevice& first = plan.gpus.front();
  uint64_t peak = first.compute_bytes;
  uint64_t copy = 0;
  const auto consider = [&](uint64_t matrix_bytes, uint64_t stage_bytes) {
    if (matrix_bytes > 0 && matrix_bytes + stage_bytes > peak) {
      peak = matrix_bytes + stage_bytes;
      copy = matrix_bytes;
    }
  };
  consider(plan.host_attention_matrix_bytes, attention_bytes);
  consider(plan.host_ffn_matrix_bytes, ffn_bytes);
  if (output_moves) consider(plan.host_output_matrix_bytes, logits_bytes);
  if (copy > 0) {
    plan.compute.gpu_bytes += peak - first.compute_bytes;
    first.compute_bytes = peak;
    plan.op_offload_copy_bytes = copy;
  }
  return output_moves;
}

// The compute buffer: the worst-case graph of n_ubatch tokens, every one an output, attending
// to the whole cache. ggml's allocator reuses memory, so the buffer is about the largest stage
// with what stays alive across it (the residual stream and the graph inputs).
void place_compute(const ModelSpec& m, const LlamaCppSettings& s, LlamaCppPlan& plan) {
  const uint64_t E = m.hidden_size;
  const uint64_t H = m.n_head;
  const uint64_t q_width = uint64_t{m.head_dim} * H;
  const uint64_t kv_width = uint64_t{m.head_dim} * m.n_head_kv;
  const bool has_full = std::any_of(m.layers.begin(), m.layers.end(), [](const auto& l) {
    const bool local =
        l.attention == AttentionKind::sliding || l.attention == AttentionKind::chunked;
    return l.attention == AttentionKind::full || l.attention == AttentionKind::mla ||
           (local && l.window_tokens == 0);
  });
  const bool has_local = std::any_of(m.layers.begin(), m.layers.end(), [](const auto& l) {
    return (l.attention == AttentionKind::sliding || l.attention == AttentionKind::chunked) &&
           l.window_tokens > 0;
  });
  const uint32_t n_stream = kv_streams(s);
  const uint64_t n_kv = (has_full ? plan.kv_cells : plan.kv_cells_swa) / n_stream;
  // A model with both kinds of layer keeps a second mask for the sliding-window cells.
  const uint64_t mask_bytes = s.flash_attn ? 2 : 4;
  const uint64_t swa_mask = has_full && has_local ? plan.kv_cells_swa / n_stream * mask_bytes : 0;
  const bool quantized_k =
      s.type_k != k_ggml_type_f16 && s.type_k != k_ggml_type_f32 && s.type_k != 30 /* bf16 */;
  // Logits of every output (f32: every token, or one per slot where llama-server reserves so),
  // the normalized hidden states, the token ids; a quantized K cache keeps about one more
  // half-width row alive here.
  const uint64_t n_tok = plan.n_ubatch;
  const uint64_t n_out = s.release->outputs_follow_rounding
                             ? n_tok
                             : std::min<uint64_t>(n_tok, reserved_outputs(s, plan.n_ubatch));
  const Stage output{"logits", 2 * E * 4 + 4 + (quantized_k ? E * 2 : 0),
                     n_out * uint64_t{m.vocab_size} * 4};
  // Attention: without flash attention the scores of every head over every cell (f32) and the
  // f32 mask; with it the f16 mask. Besides: q, the attention output, the residual stream.
  const uint64_t around = 5 * q_width * 4 + 20 + (m.n_head_kv < m.n_head ? 2 * kv_width * 4 : 0);
  const Stage attention{"attention",
                        (s.flash_attn ? 0 : n_kv * H * 4) + n_kv * mask_bytes + swa_mask + around};
  uint64_t mlp = 2ULL * m.intermediate_size * 4;
  if (m.is_moe()) {
    const uint64_t experts =
        2ULL * m.moe.n_expert_used * m.moe.expert_intermediate_size * 4 +
        2ULL * m.moe.n_expert * 4 +
        2ULL * m.moe.n_shared_expert * m.moe.shared_expert_intermediate_size * 4;
    mlp = std::max(mlp, experts);
  }
  const Stage ffn{"mlp", mlp + 3 * E * 4};
  // A stage's bytes in the reserved graph of n_tok tokens.
  const auto total = [n_tok](const Stage& st) {
    return n_tok * st.bytes_per_token + st.fixed_bytes;
  };
  const auto biggest = [&total](std::initializer_list<Stage> stages) {
    Stage best = *stages.begin();
    for (const auto& st : stages) {
      if (total(st) > total(best)) best = st;
    }
    return best;
  };
  const bool layers_on_gpu = plan.gpu_layers > 0;
  const bool layers_on_host = plan.gpu_layers < m.n_layer;
  if (!layers_on_gpu && !plan.output_on_gpu) {
    const Stage st = biggest({output, attention, ffn});
    plan.compute.host_bytes = total(st);
    plan.compute_stage = st.name;
    // On the CPU the whole graph is one allocation: replay ggml's allocator over it.
    LlamaGraphShape g;
    g.n_tokens = reserved_tokens(s, plan.n_ubatch);
    g.n_stream = n_stream;
    g.n_kv = plan.kv_cells / n_stream;
    g.n_kv_swa = plan.kv_cells_swa / n_stream;
    g.flash_attn = s.flash_attn;
    g.type_k = s.type_k;
    g.type_v = s.type_v;
    g.n_outputs = std::min(g.n_tokens, reserved_outputs(s, plan.n_ubatch));
    if (s.release->outputs_follow_rounding) g.n_outputs = g.n_tokens;
    g.mask_f16 = s.release->mask_f16;
    g.mask_pad_tokens = s.release->mask_pad_tokens;
    g.legacy_graph = !s.release->set_rows;
    g.glu_op = s.release->glu_op;
    g.embd_input = s.release->embd_input;
    if (const auto bytes = llamacpp_cpu_compute_bytes(m, g)) {
      plan.compute.host_bytes = *bytes;
      plan.compute_stage = "graph";
    }
    // A running server computes logits only for the last token of each sequence, so the pages
    // of the other rows are never touched: RAM holds the biggest other stage, or the logits of
    // n_seq_max outputs.
    const uint64_t touched_logits =
        n_tok * output.bytes_per_token + uint64_t{m.vocab_size} * 4 * std::max(1U, s.n_seq_max);
    plan.compute_host_resident_bytes = std::min(
        plan.compute.host_bytes, std::max(total(biggest({attention, ffn})), touched_logits));
    add_op_offload(s, plan, total(attention), total(ffn), total(output), n_out);
    return;
  }
  // Offloaded: each device sizes its buffer for the stages it runs; the host keeps the graph
  // inputs (token embeddings are looked up there) when it runs nothing else.
  uint64_t largest = 0;
  for (size_t d = 0; d < plan.gpus.size(); ++d) {
    LlamaCppDevice& dev = plan.gpus[d];
    if (dev.layers == 0 && !dev.output) continue;
    const Stage st = dev.output ? (dev.layers > 0 ? biggest({output, attention, ffn}) : output)
                                : biggest({attention, ffn});
    dev.compute_bytes = total(st);
    plan.compute.gpu_bytes += dev.compute_bytes;
    if (dev.compute_bytes > largest) {
      largest = dev.compute_bytes;
      plan.compute_stage = st.name;
    }
  }
  // With op offload the host's logits are computed on the first GPU.
  const bool output_moved =
      add_op_offload(s, plan, total(attention), total(ffn), total(output), n_out);
  const bool logits_on_host = !plan.output_on_gpu && !output_moved;
  if (layers_on_host) {
    plan.compute.host_bytes =
        total(logits_on_host ? biggest({output, attention, ffn}) : biggest({attention, ffn}));
  } else if (logits_on_host) {
    plan.compute.host_bytes = total(output);
  } else {
    plan.compute.host_bytes = n_tok * (E * 4 + 8);
  }
  plan.compute_host_resident_bytes = plan.compute.host_bytes;
}

}  // namespace

Expected<uint32_t> parse_cache_type(std::string_view name) {
  static constexpr uint32_t k_cache_types[] = {0, 1, 30, 8, 2, 3, 6, 7, 20};
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const uint32_t id : k_cache_types) {
    auto n = model::ggml_type_name(id);
    if (!n) continue;
    std::transform(n->begin(), n->end(), n->begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (*n == lower) return id;
  }
  return fail(ErrorKind::usage,
              fmt::format("unknown llama.cpp cache type '{}' (accepted: f32, f16, bf16, q8_0, "
                          "q4_0, q4_1, q5_0, q5_1, iq4_nl)",
                          name));
}

std::vector<int32_t> llamacpp_layer_split(uint32_t n_layer, uint32_t n_gpu_layers,
                                          const std::vector<double>& split) {
  const size_t n_dev = std::max<size_t>(1, split.size());
  // Cumulative shares, normalized (llama.cpp computes them in float).
  std::vector<float> bounds(n_dev, 1.0F);
  const bool all_zero =
      split.empty() || std::all_of(split.begin(), split.end(), [](double x) { return x == 0; });
  float sum = 0;
  for (size_t i = 0; i < n_dev; ++i) {
    sum += all_zero ? 1.0F : static_cast<float>(split[i]);
    bounds[i] = sum;
  }
  for (auto& b : bounds)
    b /= sum;
  const int64_t first = std::max<int64_t>(int64_t{n_layer} - n_gpu_layers, 0);
  const int64_t active = std::min<int64_t>(n_gpu_layers, int64_t{n_layer} + 1);
  std::vector<int32_t> out(size_t{n_layer} + 1, -1);
  for (int64_t il = 0; il <= n_layer; ++il) {
    if (il < first || il - first >= active) continue;
    const float at = static_cast<float>(il - first) / static_cast<float>(active);
    const auto it = std::upper_bound(bounds.begin(), bounds.end(), at);
    out[static_cast<size_t>(il)] = static_cast<int32_t>(
        std::min<ptrdiff_t>(it - bounds.begin(), static_cast<ptrdiff_t>(n_dev) - 1));
  }
  return out;
}

uint64_t ggml_row_bytes(uint32_t type, uint64_t n) {
  return model::ggml_tensor_bytes(type, n).value_or(0);
}

Expected<LlamaCppPlan> plan_llamacpp(const ModelSpec& m, const LlamaCppSettings& s) {
  if (s.n_ctx == 0 || s.n_seq_max == 0 || s.n_batch == 0 || s.n_ubatch == 0) {
    return fail(ErrorKind::usage, "-c, -np, -b and -ub must be at least 1");
  }
  for (const uint32_t t : {s.type_k, s.type_v}) {
    if (!model::ggml_block(t)) {
      return fail(ErrorKind::usage, fmt::format("unknown KV cache type id {}", t));
    }
  }
  const bool quantized_v =
      s.type_v != k_ggml_type_f16 && s.type_v != k_ggml_type_f32 && s.type_v != 30;
  if (quantized_v && !s.flash_attn) {
    return fail(ErrorKind::usage,
                "llama.cpp needs flash attention (-fa on) for a quantized V cache (-ctv)");
  }
  LlamaCppPlan plan;
  const uint32_t n_layer = m.n_layer;
  const uint32_t ngl = !s.has_gpu           ? 0
                       : s.n_gpu_layers < 0 ? n_layer + 1
                                            : static_cast<uint32_t>(s.n_gpu_layers);
  plan.gpu_layers = std::min(ngl, n_layer);
  plan.output_on_gpu = ngl > n_layer;
  if (s.has_gpu) {
    for (const double share : s.tensor_split) {
      if (!(share >= 0) || share > 1e9) {
        return fail(ErrorKind::usage, "-ts: each GPU's share must be a number >= 0");
      }
    }
    if (s.tensor_split.size() > 16) return fail(ErrorKind::usage, "-ts: at most 16 GPUs");
    plan.layer_gpu = llamacpp_layer_split(n_layer, ngl, s.tensor_split);
    plan.output_gpu = plan.layer_gpu.back();
    plan.layer_gpu.pop_back();
    plan.gpus.resize(std::max<size_t>(1, s.tensor_split.size()));
    for (const int32_t g : plan.layer_gpu) {
      if (g >= 0) plan.gpus[static_cast<size_t>(g)].layers += 1;
    }
    if (plan.output_gpu >= 0) plan.gpus[static_cast<size_t>(plan.output_gpu)].output = true;
  } else {
    plan.layer_gpu.assign(n_layer, -1);
  }
  plan.n_ubatch = std::min({s.n_ubatch, s.n_batch, s.n_ctx});
  place_weights(m, s, plan);
  place_kv(m, s, plan);
  place_compute(m, s, plan);
  plan.output_bytes = uint64_t{m.vocab_size} * 4 * std::max(1U, s.n_seq_max);
  plan.runtime_bytes = k_runtime_base_bytes + k_runtime_bytes_per_vocab_token * m.vocab_size;
  plan.host_total_bytes = plan.model_host_resident_bytes + plan.kv.host_bytes +
                          plan.compute_host_resident_bytes + plan.output_bytes + plan.runtime_bytes;
  plan.gpu_total_bytes = plan.model_gpu_bytes + plan.kv.gpu_bytes + plan.compute.gpu_bytes;
  return plan;
}

}  // namespace kvprof::engines
