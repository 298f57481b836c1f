// The llama.cpp releases the planner models, each as the rules that change its buffers between
// releases: the flash-attention default, the KV cache's padding and streams, the sliding-window
// cache, the KQ mask's type and padding, the outputs the graph is reserved for and the shape of
// the graph itself. One table, read by the buffer plan (buffers.cpp) and the reserved graph
// (graph.cpp); each row names the upstream changes it follows, and docs/architecture.md
// ("llama.cpp releases") says which real builds each was checked on.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kvprof/util/error.hpp"

namespace kvprof::engines {

struct LlamaCppReleaseRules {
  std::string_view name;     // "b6325": the build whose change starts the row
  uint32_t first_build = 0;  // the first build (bNNNN) the row covers
  std::string_view change;   // the upstream change that starts the row
  // -fa's default is auto, which turns flash attention on for the CPU and CUDA (b6325, #15434);
  // before, it was off unless -fa was given.
  bool flash_attn_auto = true;
  // Cells the KV cache's size is padded to, with and without flash attention: 256 / 32 until
  // b6868 (#16812) removed the padding, 256 for both from b6975 (#17046).
  uint32_t kv_pad_cells_fa = 256;
  uint32_t kv_pad_cells_no_fa = 256;
  // A KV stream per slot when the cache is not unified (b6071, #14959, with set_rows on by
  // default); before, one cache shared by all slots.
  bool kv_streams = true;
  // Sliding-window layers keep a cache of the window only (b5429, #13194); before, all cells.
  bool swa_cache = true;
  // The KQ mask is made f16 for flash attention (b9410, #23764); before, an f32 mask and its f16
  // copy (ggml_cast), both in the compute buffer.
  bool mask_f16 = true;
  // The mask's token rows padded to GGML_KQ_MASK_PAD: 32, 64 from b4617 (#11583), 1 from b7256.
  uint32_t mask_pad_tokens = 1;
  // llama-server reserves the graph for one output per slot (n_outputs_max = -np, b9460,
  // #23861); before, and in libllama's own default, for every token of the ubatch.
  bool server_outputs_per_slot = true;
  // The FFN's gate as one SWIGLU/GEGLU op (b5776, #14158); before, the activation and the
  // product as two ops.
  bool glu_op = true;
  // K and V stored with set_rows and index inputs (b6071, #14959); before, copies into views of
  // the cache.
  bool set_rows = true;
  // The input for embeddings given directly sits in every graph (b7774, #18550).
  bool embd_input = true;
  // How the reserved graph's tokens are made a multiple of the slots (-np): not at all (one
  // sequence, before b5550), rounded down (b5550, #13746), rounded up (b5641, #14140).
  enum class Rounding : uint8_t { none, down, up };
  Rounding reserve_rounding = Rounding::up;
  // The rounded-up graph has an output per token (b7620, #18536, until b9460's output limit).
  bool outputs_follow_rounding = false;
  // llama-server left at one slot runs 4 sharing one cache (b6925, #16736).
  bool server_auto_slots = true;
  // The weights the CPU backend repacks into a buffer of its own on x86 with AVX2 (ggml-cpu's
  // get_optimal_repack_type; matrices of rows in eights): Q4_0 from b4282 (#10446), Q4_K from
  // b4929 (#12332), IQ4_NL from b6144 (#14904), MXFP4 from b8175 (#19738). Q2_K (AVX-512 only,
  // b6056) is not planned.
  bool repack_q4_0 = true;
  bool repack_q4_k = true;
  bool repack_iq4_nl = true;
  bool repack_mxfp4 = true;
  // llama-server's -c when none is given: 4096 from b4014 (#10136) to b7406; 0 (the model's
  // own context, which --fit may lower) before and from b7407 (#16653).
  uint32_t server_default_ctx = 0;
  // The words of its startup lines (each is the logging function's name): the weights'
  // (llm_load_tensors before b4463, #11110), the output buffer's (llama_new_context_with_model,
  // then llama_init_from_model, then llama_context from b4881, #12181), the KV cache's
  // (llama_kv_cache_init, init from b4881, llama_kv_cache_unified from b5441, llama_kv_cache from
  // b6233, #15467) and the compute buffer's (the output's, sched_reserve from b7746, #18547).
  std::string_view log_weights = "load_tensors";
  std::string_view log_context = "llama_context";
  std::string_view log_kv = "llama_kv_cache";
  std::string_view log_compute = "sched_reserve";
  bool log_model_buffers = true;  // "CPU_Mapped model buffer" (#10026, b3990); before "CPU buffer"
  std::string_view log_repack_buffer = "CPU_REPACK";  // "CPU_AARCH64" before b5615 (#13892)
  bool log_kv_size_line = true;   // the KV cache's "size = ... (cells, layers, seqs)" (b5441)
  bool log_kv_streams = true;     // its "n/n seqs": sequences per stream (b5913, #14363)
  std::string_view checked;       // the real builds of the row kvprof checked the plan on
};

// Every modelled release, oldest first; the last is the newest.
std::span<const LlamaCppReleaseRules> llamacpp_releases();

// The newest modelled release (the default).
const LlamaCppReleaseRules& llamacpp_latest_release();

// A release as kvprof reads it: its rules, the build it names and a warning when the build is
// outside the modelled range (the nearest row is used).
struct LlamaCppRelease {
  const LlamaCppReleaseRules* rules = nullptr;
  uint32_t build = 0;   // the build it names (a v-tag's build); 0 for "latest"
  std::string name;     // as outputs print it: "b5640", "v0.4.0 (b10809)"
  std::string warning;  // non-empty when the release is outside the modelled range
};

// The release for "b5640", "5640", "v0.4.0", "0.5.0-dev", "latest" or "" (= latest), and the
// forms llama.cpp prints ("version: 7166 (eec1e33a9)", "build: 6527 (a1b2c3d)", "b6527-a1b2c3d",
// "ggml-org/llama.cpp v0.4.0"). A usage error for text that names no release.
Expected<LlamaCppRelease> parse_llamacpp_release(std::string_view text);

// "b3889, b4014, ... v0.5.0 (b11146)": for help and error messages.
std::string llamacpp_supported_releases();

}  // namespace kvprof::engines
