// Dummy GGUF planning: per-architecture tensor inventories as llama.cpp's loader creates them
// (llama, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3), hyperparameter keys, tokenizer.
#include "kvprof/model/dummy_gguf.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <climits>

#include "kvprof/model/dummy_vocab.hpp"
#include "kvprof/model/gguf.hpp"
#include "kvprof/model/gguf_mix.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::model {
namespace {

constexpr std::array<std::string_view, 7> k_supported = {
    "llama (HF llama, mistral, mixtral)",
    "qwen2 (HF qwen2)",
    "qwen3 (HF qwen3)",
    "qwen3moe (HF qwen3_moe)",
    "phi3 (HF phi3)",
    "gemma2 (HF gemma2)",
    "gemma3 (HF gemma3, gemma3_text)",
};

// llama.cpp's general.file_type for a tensor type (LLAMA_FTYPE_*).
uint32_t file_type_of(uint32_t ggml_type) {
  switch (ggml_type) {
    case ggml_type::f32:
      return 0;
    case ggml_type::f16:
      return 1;
    case ggml_type::q4_0:
      return 2;
    case ggml_type::q8_0:
      return 7;
    case ggml_type::q4_k:
      return 14;  // Q4_K_S: every matrix Q4_K
    case ggml_type::bf16:
      return 32;
    default:
      return 1;
  }
}

// The type a matrix with rows of `ne0` elements gets: the requested one when its rows are whole
// blocks, else Q8_0 (32-element blocks) for quantized types, else F16.
uint32_t matrix_type(uint32_t requested, uint64_t ne0) {
  const auto block = ggml_block(requested);
  if (block && ne0 % block->block_elements == 0) return requested;
  if (!ggml_type_is_float(requested) && ne0 % 32 == 0) return ggml_type::q8_0;
  return ggml_type::f16;
}

// Collects the tensors in file order; finish() gives each its type (the requested one, or the
// quantization mix's choice) and adds them to the writer.
class Planner {
 public:
  explicit Planner(uint32_t type) : m_type(type) {}

  Expected<void> matrix(std::string name, std::vector<uint64_t> shape) {
    m_pending.push_back({std::move(name), std::move(shape), DummyFill::random, true});
    return {};
  }
  Expected<void> norm(std::string name, uint64_t n) {
    m_pending.push_back({std::move(name), {n}, DummyFill::ones, false});
    return {};
  }
  Expected<void> vec(std::string name, std::vector<uint64_t> shape) {
    m_pending.push_back({std::move(name), std::move(shape), DummyFill::random, false});
    return {};
  }

  Expected<void> finish(const std::optional<GgufMix>& mix, const MixModel& model, DummyGguf& out) {
    std::vector<uint32_t> types;
    if (mix) {
      std::vector<MixTensor> tensors;
      for (const auto& p : m_pending)
        tensors.push_back({p.name, p.shape});
      types = assign_mix_types(*mix, model, tensors);
    }
    for (size_t i = 0; i < m_pending.size(); ++i) {
      auto& p = m_pending[i];
      const uint32_t type = mix        ? types[i]
                            : p.matrix ? matrix_type(m_type, p.shape[0])
                                       : ggml_type::f32;
      if (auto ok = out.writer.add_tensor(std::move(p.name), type, std::move(p.shape)); !ok)
        return ok;
      out.fills.push_back(p.fill);
      out.tensor_bytes += out.writer.tensors().back().bytes;
    }
    m_pending.clear();
    return {};
  }

 private:
  struct Pending {
    std::string name;
    std::vector<uint64_t> shape;
    DummyFill fill;
    bool matrix;
  };
  uint32_t m_type;
  std::vector<Pending> m_pending;
};

#define DUMMY_TRY(expr)                   \
  do {                                    \
    if (auto r_ = (expr); !r_) return r_; \
  } while (0)

// Structural features llama.cpp's loader for these architectures does not have.
Expected<void> check_structure(const ModelSpec& s, const std::string& arch) {
  const auto unsupported = [&](std::string_view what) {
    return fail(ErrorKind::input, fmt::format("make-gguf: {} ({}) has {}, which the '{}' "
                                              "architecture of llama.cpp does not load",
                                              s.id, s.model_type, what, arch));
  };
  if (s.mla.enabled()) return unsupported("multi-head latent attention");
  if (s.ssm.kind != SsmSpec::Kind::none) return unsupported("state-space layers");
  if (s.moe.n_shared_expert > 0) return unsupported("shared experts");
  if (s.mlp_matrices != 3) return unsupported("a two-matrix MLP");
  if (s.layer_norm_bias) return unsupported("LayerNorm biases");
  if (s.parallel_attn_mlp) return unsupported("parallel attention and MLP");
  for (const auto& l : s.layers) {
    if (l.attention != AttentionKind::full && l.attention != AttentionKind::sliding)
      return unsupported("layers that are neither full nor sliding attention");
    if (s.is_moe() && !l.moe) return unsupported("a mix of dense and MoE layers");
  }
  if (s.is_moe() && arch != "llama" && arch != "qwen3moe")
    return unsupported("mixture-of-experts layers");
  if (!s.is_moe() && arch == "qwen3moe") return unsupported("no experts");
  if (s.n_layer == 0 || s.hidden_size == 0 || s.n_head == 0 || s.head_dim == 0) {
    return fail(ErrorKind::input,
                fmt::format("make-gguf: {} lacks a dimension (layers {}, hidden {}, heads {}, "
                            "head_dim {})",
                            s.id, s.n_layer, s.hidden_size, s.n_head, s.head_dim));
  }
  if (s.n_head_kv == 0 || s.n_head % s.n_head_kv != 0) {
    return fail(ErrorKind::input, fmt::format("make-gguf: {} has {} heads for {} KV heads", s.id,
                                              s.n_head, s.n_head_kv));
  }
  if (!s.is_moe() && s.intermediate_size == 0)
    return fail(ErrorKind::input, fmt::format("make-gguf: {} has no intermediate_size", s.id));
  if (s.is_moe() && (s.moe.n_expert_used == 0 || s.moe.expert_intermediate_size == 0)) {
    return fail(ErrorKind::input,
                fmt::format("make-gguf: {} lacks experts per token or the expert size", s.id));
  }
  return {};
}

// Tensors, in llama.cpp's names and ggml shapes (ne[0] = input features).
Expected<void> plan_tensors(const ModelSpec& s, const std::string& arch, Planner& p) {
  const uint64_t n = s.hidden_size, hd = s.head_dim, vocab = s.vocab_size;
  const uint64_t q = s.n_head * hd, kv = s.n_head_kv * hd;
  const bool gemma = arch == "gemma2" || arch == "gemma3";
  DUMMY_TRY(p.matrix("token_embd.weight", {n, vocab}));
  DUMMY_TRY(p.norm("output_norm.weight", n));
  // gemma2 always ties the output to token_embd (a file with output.weight is rejected).
  if (!s.tie_word_embeddings && !gemma) DUMMY_TRY(p.matrix("output.weight", {n, vocab}));
  for (uint32_t i = 0; i < s.n_layer; ++i) {
    const auto blk = [i](std::string_view suffix) { return fmt::format("blk.{}.{}", i, suffix); };
    DUMMY_TRY(p.norm(blk("attn_norm.weight"), n));
    if (arch == "phi3") {
      DUMMY_TRY(p.matrix(blk("attn_qkv.weight"), {n, q + 2 * kv}));
    } else {
      DUMMY_TRY(p.matrix(blk("attn_q.weight"), {n, q}));
      DUMMY_TRY(p.matrix(blk("attn_k.weight"), {n, kv}));
      DUMMY_TRY(p.matrix(blk("attn_v.weight"), {n, kv}));
    }
    if (s.attention_bias && (arch == "qwen2" || arch == "llama")) {
      DUMMY_TRY(p.vec(blk("attn_q.bias"), {q}));
      DUMMY_TRY(p.vec(blk("attn_k.bias"), {kv}));
      DUMMY_TRY(p.vec(blk("attn_v.bias"), {kv}));
    }
    DUMMY_TRY(p.matrix(blk("attn_output.weight"), {q, n}));
    if (s.o_bias && arch == "llama") DUMMY_TRY(p.vec(blk("attn_output.bias"), {n}));
    if (arch == "qwen3" || arch == "qwen3moe" || arch == "gemma3") {
      DUMMY_TRY(p.norm(blk("attn_q_norm.weight"), hd));
      DUMMY_TRY(p.norm(blk("attn_k_norm.weight"), hd));
    }
    if (gemma) DUMMY_TRY(p.norm(blk("post_attention_norm.weight"), n));
    DUMMY_TRY(p.norm(blk("ffn_norm.weight"), n));
    if (s.is_moe()) {
      const uint64_t e = s.moe.n_expert, ff = s.moe.expert_intermediate_size;
      DUMMY_TRY(p.vec(blk("ffn_gate_inp.weight"), {n, e}));
      DUMMY_TRY(p.matrix(blk("ffn_gate_exps.weight"), {n, ff, e}));
      DUMMY_TRY(p.matrix(blk("ffn_down_exps.weight"), {ff, n, e}));
      DUMMY_TRY(p.matrix(blk("ffn_up_exps.weight"), {n, ff, e}));
    } else if (arch == "phi3") {
      DUMMY_TRY(p.matrix(blk("ffn_up.weight"), {n, 2 * uint64_t{s.intermediate_size}}));
      DUMMY_TRY(p.matrix(blk("ffn_down.weight"), {s.intermediate_size, n}));
    } else {
      const uint64_t ff = s.intermediate_size;
      DUMMY_TRY(p.matrix(blk("ffn_gate.weight"), {n, ff}));
      DUMMY_TRY(p.matrix(blk("ffn_down.weight"), {ff, n}));
      DUMMY_TRY(p.matrix(blk("ffn_up.weight"), {n, ff}));
    }
    if (gemma) DUMMY_TRY(p.norm(blk("post_ffw_norm.weight"), n));
  }
  return {};
}

uint32_t sliding_window(const ModelSpec& s) {
  for (const auto& l : s.layers) {
    if (l.attention == AttentionKind::sliding && l.window_tokens > 0) return l.window_tokens;
  }
  return 0;
}

// The "<arch>.*" hyperparameters and general.* keys.
Expected<void> plan_metadata(const ModelSpec& s, const std::string& arch, uint32_t file_type,
                             GgufWriter& w) {
  const auto key = [&arch](std::string_view suffix) { return fmt::format("{}.{}", arch, suffix); };
  const bool qwen_or_gemma = arch.starts_with("qwen") || arch.starts_with("gemma");
  DUMMY_TRY(w.set_string("general.architecture", arch));
  DUMMY_TRY(w.set_string("general.type", "model"));
  DUMMY_TRY(w.set_string("general.name", fmt::format("{} (kvprof dummy weights)", s.id)));
  DUMMY_TRY(w.set_u32("general.file_type", file_type));
  DUMMY_TRY(w.set_u32("general.quantization_version", 2));
  const uint64_t ctx = s.max_position_embeddings > 0 ? s.max_position_embeddings : 4096;
  DUMMY_TRY(
      w.set_u32(key("context_length"), static_cast<uint32_t>(std::min<uint64_t>(ctx, INT32_MAX))));
  DUMMY_TRY(w.set_u32(key("embedding_length"), s.hidden_size));
  DUMMY_TRY(w.set_u32(key("block_count"), s.n_layer));
  DUMMY_TRY(w.set_u32(key("feed_forward_length"), s.intermediate_size > 0
                                                      ? s.intermediate_size
                                                      : s.moe.expert_intermediate_size));
  DUMMY_TRY(w.set_u32(key("attention.head_count"), s.n_head));
  DUMMY_TRY(w.set_u32(key("attention.head_count_kv"), s.n_head_kv));
  DUMMY_TRY(w.set_u32(key("attention.key_length"), s.head_dim));
  DUMMY_TRY(w.set_u32(key("attention.value_length"), s.head_dim));
  DUMMY_TRY(w.set_u32(key("rope.dimension_count"), s.rotary_dim > 0 ? s.rotary_dim : s.head_dim));
  DUMMY_TRY(w.set_f32(key("rope.freq_base"), qwen_or_gemma && arch != "gemma2" ? 1e6F : 1e4F));
  DUMMY_TRY(w.set_f32(key("attention.layer_norm_rms_epsilon"), qwen_or_gemma ? 1e-6F : 1e-5F));
  DUMMY_TRY(w.set_u32(key("vocab_size"), s.vocab_size));
  if (s.is_moe()) {
    DUMMY_TRY(w.set_u32(key("expert_count"), s.moe.n_expert));
    DUMMY_TRY(w.set_u32(key("expert_used_count"), s.moe.n_expert_used));
    DUMMY_TRY(w.set_u32(key("expert_feed_forward_length"), s.moe.expert_intermediate_size));
  }
  if (arch == "gemma2" || arch == "gemma3" || arch == "phi3") {
    const uint32_t window = sliding_window(s);
    const uint32_t fallback = arch == "gemma2" ? 4096 : arch == "gemma3" ? 1024 : 0;
    if (window > 0 || fallback > 0)
      DUMMY_TRY(w.set_u32(key("attention.sliding_window"), window > 0 ? window : fallback));
  }
  if (arch == "gemma2") {
    DUMMY_TRY(w.set_f32(key("attn_logit_softcapping"), 50.0F));
    DUMMY_TRY(w.set_f32(key("final_logit_softcapping"), 30.0F));
  }
  return {};
}

Expected<void> plan_tokenizer(const ModelSpec& s, const std::string& arch,
                              const std::string& chat_template, GgufWriter& w) {
  // llama.cpp's vocabulary loader looks these up by text for phi3 (and fails without them).
  static constexpr std::array<std::string_view, 2> k_phi3_controls = {"<|endoftext|>", "<|end|>"};
  std::span<const std::string_view> controls;
  if (arch == "phi3") controls = k_phi3_controls;
  auto vocab = make_dummy_vocab(s.vocab_size, controls);
  if (!vocab) return std::unexpected(vocab.error().with_context("make-gguf"));
  DUMMY_TRY(w.set_string("tokenizer.ggml.model", "llama"));
  DUMMY_TRY(w.set_strings("tokenizer.ggml.tokens", vocab->tokens));
  DUMMY_TRY(w.set_f32s("tokenizer.ggml.scores", vocab->scores));
  DUMMY_TRY(w.set_i32s("tokenizer.ggml.token_type", vocab->token_types));
  DUMMY_TRY(w.set_u32("tokenizer.ggml.unknown_token_id", vocab->unk_id));
  DUMMY_TRY(w.set_u32("tokenizer.ggml.bos_token_id", vocab->bos_id));
  DUMMY_TRY(w.set_u32("tokenizer.ggml.eos_token_id", vocab->eos_id));
  DUMMY_TRY(w.set_bool("tokenizer.ggml.add_bos_token", true));
  DUMMY_TRY(w.set_bool("tokenizer.ggml.add_eos_token", false));
  if (!chat_template.empty()) {
    DUMMY_TRY(w.set_string("tokenizer.chat_template", chat_template));
  }
  return {};
}

}  // namespace

std::span<const std::string_view> dummy_gguf_supported() {
  return k_supported;
}

Expected<uint32_t> parse_dummy_type(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, uint32_t>, 6> k_types = {{
      {"f16", ggml_type::f16},
      {"bf16", ggml_type::bf16},
      {"f32", ggml_type::f32},
      {"q8_0", ggml_type::q8_0},
      {"q4_0", ggml_type::q4_0},
      {"q4_k", ggml_type::q4_k},
  }};
  for (const auto& [n, id] : k_types) {
    if (iequals(name, n)) return id;
  }
  return fail(
      ErrorKind::usage,
      fmt::format("unknown --type '{}' (choose f16, bf16, f32, q8_0, q4_0, q4_k, or a mix: {})",
                  name, gguf_mix_names()));
}

Expected<std::string> dummy_gguf_arch(const ModelSpec& spec) {
  const std::string& t = spec.model_type;
  if (t == "llama" || t == "mistral" || t == "mixtral") return std::string("llama");
  if (t == "qwen2" || t == "qwen3" || t == "phi3" || t == "gemma2") return t;
  if (t == "qwen3_moe") return std::string("qwen3moe");
  if (t == "gemma3" || t == "gemma3_text") return std::string("gemma3");
  return fail(
      ErrorKind::input,
      fmt::format("make-gguf: architecture '{}' ({}) is not supported; supported: {}",
                  t.empty() ? spec.architecture : t, spec.id, fmt::join(k_supported, "; ")));
}

Expected<DummyGguf> plan_dummy_gguf(const ModelSpec& spec, const DummyGgufOptions& options,
                                    const std::optional<GgufMix>& mix) {
  auto arch = dummy_gguf_arch(spec);
  if (!arch) return std::unexpected(arch.error());
  if (auto ok = check_structure(spec, *arch); !ok) return std::unexpected(ok.error());
  if (!ggml_block(options.ggml_type)) {
    return fail(ErrorKind::usage,
                fmt::format("make-gguf: unknown ggml type {}", options.ggml_type));
  }
  DummyGguf out;
  out.arch = *arch;
  const uint32_t file_type = mix ? mix->file_type : file_type_of(options.ggml_type);
  if (auto ok = plan_metadata(spec, out.arch, file_type, out.writer); !ok)
    return std::unexpected(ok.error());
  if (auto ok = plan_tokenizer(spec, out.arch, options.chat_template, out.writer); !ok)
    return std::unexpected(ok.error());
  Planner planner(options.ggml_type);
  if (auto ok = plan_tensors(spec, out.arch, planner); !ok) return std::unexpected(ok.error());
  const MixModel model{out.arch, spec.n_layer, spec.moe.n_expert,
                       spec.n_head_kv > 0 ? spec.n_head / spec.n_head_kv : 1};
  if (auto ok = planner.finish(mix, model, out); !ok) return std::unexpected(ok.error());
  return out;
}

Expected<DummyGgufSummary> write_dummy_gguf(const DummyGguf& plan, const DummyGgufOptions& options,
                                            const std::filesystem::path& path,
                                            const GgufProgressFn& progress) {
  const auto& tensors = plan.writer.tensors();
  const auto fill = [&](size_t index, uint64_t offset_bytes, std::span<uint8_t> out) {
    const uint64_t seed = options.seed ^ (0x9E3779B97F4A7C15ULL * (index + 1));
    fill_dummy(tensors[index].ggml_type, plan.fills[index], seed, offset_bytes, out);
  };
  if (auto ok = plan.writer.write(path, fill, progress); !ok) return std::unexpected(ok.error());
  return DummyGgufSummary{plan.arch, tensors.size(), plan.tensor_bytes, plan.writer.file_bytes()};
}

}  // namespace kvprof::model
