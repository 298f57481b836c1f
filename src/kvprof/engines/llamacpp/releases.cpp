// The modelled llama.cpp releases (see releases.hpp). Each row starts at the build of one
// upstream change (build numbers are llama.cpp's bNNNN tags: the count of commits on master);
// every rule not changed by a row is the row before's.
#include "kvprof/engines/llamacpp/releases.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <optional>
#include <utility>

#include "kvprof/util/strings.hpp"

namespace kvprof::engines {

namespace {

// llama.cpp's semantic-version tags (from b10394, August 2026) and the build each was made at.
struct VersionTag {
  uint32_t minor = 0;
  uint32_t build = 0;
};
constexpr std::array<VersionTag, 2> k_version_tags{{{4, 10809}, {5, 11146}}};

constexpr size_t k_release_count = 30;

constexpr std::array<LlamaCppReleaseRules, k_release_count> k_releases = [] {
  std::array<LlamaCppReleaseRules, k_release_count> r{};
  LlamaCppReleaseRules x;  // b3889 (October 2024) and earlier
  x.name = "b3889";
  x.change = "the oldest modelled";
  x.flash_attn_auto = false;
  x.kv_pad_cells_fa = 256;
  x.kv_pad_cells_no_fa = 32;
  x.kv_streams = false;
  x.swa_cache = false;
  x.mask_f16 = false;
  x.mask_pad_tokens = 32;
  x.server_outputs_per_slot = false;
  x.glu_op = false;
  x.set_rows = false;
  x.embd_input = false;
  x.server_auto_slots = false;
  x.repack_q4_0 = x.repack_q4_k = x.repack_iq4_nl = x.repack_mxfp4 = false;
  x.log_repack_buffer = "CPU_AARCH64";
  x.server_default_ctx = 0;
  x.reserve_rounding = LlamaCppReleaseRules::Rounding::none;
  x.log_weights = "llm_load_tensors";
  x.log_context = "llama_new_context_with_model";
  x.log_kv = "llama_kv_cache_init";
  x.log_compute = "llama_new_context_with_model";
  x.log_model_buffers = false;
  x.log_kv_size_line = false;
  x.log_kv_streams = false;
  x.checked = "b3889 (node-llama-cpp 3.1.1)";
  size_t i = 0;
  const auto row = [&](std::string_view name, uint32_t build, std::string_view change) {
    x.name = name;
    x.first_build = build;
    x.change = change;
    x.checked = {};
  };
  r[i++] = x;
  row("b3990", 3990, "#10026: the weights logged per buffer type, as CPU_Mapped model buffers");
  x.log_model_buffers = true;
  r[i++] = x;
  row("b4014", 4014, "#10136: llama-server's default -c becomes 4096");
  x.server_default_ctx = 4096;
  r[i++] = x;
  row("b4282", 4282, "#10446: the CPU backend repacks Q4_0 into a buffer of its own");
  x.repack_q4_0 = true;
  r[i++] = x;
  row("b4463", 4463, "#11110: the lines of load_tensors and llama_init_from_model");
  x.log_weights = "load_tensors";
  x.log_context = x.log_compute = "llama_init_from_model";
  r[i++] = x;
  row("b4617", 4617, "#11583: the KQ mask's rows padded to 64");
  x.mask_pad_tokens = 64;
  x.checked = "b4753 (node-llama-cpp 3.6.0)";
  r[i++] = x;
  row("b4881", 4881, "#12181: llama_context's lines, the KV cache's from its init");
  x.log_context = x.log_compute = "llama_context";
  x.log_kv = "init";
  r[i++] = x;
  row("b4929", 4929, "#12332: the CPU backend repacks Q4_K too (x86 AVX2)");
  x.repack_q4_k = true;
  r[i++] = x;
  row("b5429", 5429, "#13194: sliding-window layers cache their window only");
  x.swa_cache = true;
  r[i++] = x;
  row("b5441", 5441, "#13660: the KV cache's lines from llama_kv_cache_unified, with its size");
  x.log_kv = "llama_kv_cache_unified";
  x.log_kv_size_line = true;
  r[i++] = x;
  row("b5550", 5550, "#13746: the reserved graph's tokens rounded down to a multiple of -np");
  x.reserve_rounding = LlamaCppReleaseRules::Rounding::down;
  r[i++] = x;
  row("b5615", 5615, "#13892: the repacked weights' buffer is named CPU_REPACK");
  x.log_repack_buffer = "CPU_REPACK";
  x.checked = "b5640 (node-llama-cpp 3.10.0)";
  r[i++] = x;
  row("b5641", 5641, "#14140: the reserved graph's tokens rounded up to a multiple of -np");
  x.reserve_rounding = LlamaCppReleaseRules::Rounding::up;
  r[i++] = x;
  row("b5776", 5776, "#14158: the FFN's gate as one SWIGLU/GEGLU op");
  x.glu_op = true;
  r[i++] = x;
  row("b5913", 5913, "#14363: the KV cache's size line counts sequences per stream");
  x.log_kv_streams = true;
  r[i++] = x;
  row("b6071", 6071, "#14959: set_rows stores K and V; a KV stream per slot without -kvu");
  x.set_rows = true;
  x.kv_streams = true;
  r[i++] = x;
  row("b6144", 6144, "#14904: the CPU backend repacks IQ4_NL on x86 too");
  x.repack_iq4_nl = true;
  r[i++] = x;
  row("b6233", 6233, "#15467: the KV cache's lines from llama_kv_cache");
  x.log_kv = "llama_kv_cache";
  r[i++] = x;
  row("b6325", 6325, "#15434: -fa defaults to auto (on for the CPU and CUDA)");
  x.flash_attn_auto = true;
  x.checked = "b6431 (node-llama-cpp 3.13.0)";
  r[i++] = x;
  row("b6868", 6868, "#16812: the KV cache's size is not padded");
  x.kv_pad_cells_fa = 1;
  x.kv_pad_cells_no_fa = 1;
  r[i++] = x;
  row("b6925", 6925, "#16736: llama-server left at one slot runs 4 sharing one cache");
  x.server_auto_slots = true;
  r[i++] = x;
  row("b6975", 6975, "#17046: the KV cache's size padded to 256 cells");
  x.kv_pad_cells_fa = 256;
  x.kv_pad_cells_no_fa = 256;
  r[i++] = x;
  row("b7256", 7256, "#17505: the KQ mask's rows not padded");
  x.mask_pad_tokens = 1;
  r[i++] = x;
  row("b7407", 7407, "#16653: llama-server's default -c is the model's own context (--fit)");
  x.server_default_ctx = 0;
  r[i++] = x;
  row("b7620", 7620, "#18536: the rounded-up reserved graph has an output per token");
  x.outputs_follow_rounding = true;
  r[i++] = x;
  row("b7746", 7746, "#18547: the compute buffers' lines from sched_reserve");
  x.log_compute = "sched_reserve";
  r[i++] = x;
  row("b7774", 7774, "#18550: an embeddings input in every graph");
  x.embd_input = true;
  x.checked = "b8121 (node-llama-cpp 3.16.2)";
  r[i++] = x;
  row("b8175", 8175, "#19738: the CPU backend repacks MXFP4 too (x86 AVX2)");
  x.repack_mxfp4 = true;
  r[i++] = x;
  row("b9410", 9410, "#23764: an f16 KQ mask for flash attention");
  x.mask_f16 = true;
  r[i++] = x;
  row("b9460", 9460, "#23861: llama-server reserves one output per slot");
  x.server_outputs_per_slot = true;
  x.outputs_follow_rounding = false;
  x.checked = "v0.4.0 (node-llama-cpp 3.21.1), v0.5.0 (3.22.1)";
  r[i++] = x;
  return r;
}();

static_assert(k_releases.back().first_build == 9460);

const LlamaCppReleaseRules& llamacpp_row_for(uint32_t build) {
  const LlamaCppReleaseRules* best = &k_releases.front();
  for (const auto& r : k_releases) {
    if (r.first_build <= build) best = &r;
  }
  return *best;
}

// The number at the front of `t`, and what follows it.
std::optional<std::pair<uint32_t, std::string_view>> leading_number(std::string_view t) {
  uint32_t n = 0;
  const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (ec != std::errc{} || p == t.data()) return std::nullopt;
  return std::pair{n, t.substr(static_cast<size_t>(p - t.data()))};
}

}  // namespace

std::span<const LlamaCppReleaseRules> llamacpp_releases() {
  return k_releases;
}

const LlamaCppReleaseRules& llamacpp_latest_release() {
  return k_releases.back();
}

Expected<LlamaCppRelease> parse_llamacpp_release(std::string_view text) {
  std::string lower = to_lower(trim(text));
  LlamaCppRelease out;
  if (lower.empty() || lower == "latest") {
    out.rules = &llamacpp_latest_release();
    out.name =
        fmt::format("v0.{}.0 (b{})", k_version_tags.back().minor, k_version_tags.back().build);
    return out;
  }
  // The forms llama.cpp prints: "version: 7166 (eec1e33a9)" (--version), "build: 6527 (a1b2c3d)"
  // (the log), "b6527-a1b2c3d" (/props build_info), "ggml-org/llama.cpp v0.4.0" (npm's build).
  for (std::string_view prefix : {"ggml-org/", "llama.cpp", "version:", "build:"}) {
    if (lower.starts_with(prefix)) lower = trim(std::string_view(lower).substr(prefix.size()));
  }
  std::string_view t = lower;
  const auto bad = [&] {
    return fail(ErrorKind::usage,
                fmt::format("--engine-version '{}' names no llama.cpp release (use a build like "
                            "b5640, or a version like v0.4.0)",
                            text));
  };
  if (t.starts_with('v') || t.find('.') != std::string_view::npos) {
    // v0.4.0, 0.5.0-dev: a semantic version, mapped to its build.
    if (t.starts_with('v')) t.remove_prefix(1);
    const auto major = leading_number(t);
    if (!major || major->first != 0 || !major->second.starts_with('.')) return bad();
    const auto minor = leading_number(major->second.substr(1));
    if (!minor) return bad();
    const VersionTag* tag = nullptr;
    for (const auto& v : k_version_tags) {
      if (v.minor <= minor->first) tag = &v;
    }
    if (tag == nullptr) {
      // 0.1 - 0.3 came between b10394 and v0.4.0: the rules of v0.4.0's row hold for them.
      tag = &k_version_tags.front();
    } else if (minor->first > k_version_tags.back().minor) {
      out.warning = fmt::format(
          "llama.cpp v0.{} is newer than kvprof models: planned with the rules of v0.{}.0",
          minor->first, k_version_tags.back().minor);
    }
    out.build = tag->build;
    out.rules = &llamacpp_row_for(out.build);
    uint32_t patch = 0;
    if (minor->second.starts_with('.')) {
      if (const auto p = leading_number(minor->second.substr(1))) patch = p->first;
    }
    out.name = fmt::format("v0.{}.{} (b{})", minor->first, patch, tag->build);
    return out;
  }
  if (t.starts_with('b')) t.remove_prefix(1);
  const auto build = leading_number(t);
  if (!build || build->first == 0) return bad();
  out.build = build->first;
  out.rules = &llamacpp_row_for(out.build);
  out.name = fmt::format("b{}", out.build);
  if (out.build > k_version_tags.back().build) {
    out.warning = fmt::format(
        "llama.cpp b{} is newer than kvprof models: planned with the rules of v0.{}.0 (b{})",
        out.build, k_version_tags.back().minor, k_version_tags.back().build);
  } else if (out.build < 3889) {
    out.warning = fmt::format(
        "llama.cpp b{} is older than kvprof models: planned with the rules of b3889", out.build);
  }
  return out;
}

std::string llamacpp_supported_releases() {
  std::string out;
  for (const auto& r : k_releases) {
    out += fmt::format("{}{}", out.empty() ? "" : ", ", r.name);
  }
  return fmt::format("{} (each row holds until the next); v0.4.0 = b{}, v0.5.0 = b{}", out,
                     k_version_tags[0].build, k_version_tags[1].build);
}

}  // namespace kvprof::engines
