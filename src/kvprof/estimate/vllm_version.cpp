// The modelled vLLM releases (see vllm_version.hpp); the facts behind each row are cited in
// docs/architecture.md, "vLLM versions".
#include "kvprof/estimate/vllm_version.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>

#include "kvprof/util/strings.hpp"

namespace kvprof::estimate {
namespace {

constexpr VllmVersionRules v0_rules(std::string_view name, std::string_view releases,
                                    bool charges_context, uint32_t chunked_tokens,
                                    VllmLogStyle style) {
  VllmVersionRules r;
  r.name = name;
  r.releases = releases;
  r.v0_engine = true;
  r.charges_cuda_context = charges_context;
  r.hybrid_kv_groups = false;
  r.large_gpu_batch_defaults = false;
  r.default_max_num_batched_tokens = chunked_tokens;
  r.default_max_num_seqs = 256;
  // Only the float32 logits of the sampled rows are alive at the peak (the A10 and H100 V0
  // records: 0.22 and 0.23 GiB of activations leave no room for sort buffers).
  r.sampler_bytes_per_logit = 2.0;
  r.non_torch_base_bytes = 120ULL << 20;
  r.non_torch_sampler_bytes = 0;
  r.max_capture_size = 256;
  r.full_decode_graphs = false;  // one full decode graph per size, no piecewise graphs
  r.graph_sizes_step16_above_256 = false;
  r.graph_sizes_capped_by_seqs = true;
  r.cuda_graph_scale = 0.25;
  r.log_style = style;
  return r;
}

constexpr VllmVersionRules v1_rules(std::string_view name, std::string_view releases, bool early) {
  VllmVersionRules r;
  r.name = name;
  r.releases = releases;
  r.charges_cuda_context = early;
  r.hybrid_kv_groups = !early;
  r.large_gpu_batch_defaults = !early;
  r.full_decode_graphs = false;  // PIECEWISE graphs only before v0.11
  r.graph_sizes_step16_above_256 = false;
  r.graph_sizes_capped_by_seqs = false;
  r.log_style = early ? VllmLogStyle::v1_early : VllmLogStyle::v1;
  return r;
}

constexpr std::array<VllmVersionRules, 6> k_versions = [] {
  std::array<VllmVersionRules, 6> v{};
  v[0] = v0_rules("v0.6", "v0.6.x (V0 engine)", true, 512, VllmLogStyle::v0_6);
  v[1] = v0_rules("v0.7", "v0.7.x (V0 engine)", false, 2048, VllmLogStyle::v0_7);
  v[2] = v1_rules("v0.8", "v0.8.x - v0.9.x (V1 engine)", true);
  v[3] = v1_rules("v0.10", "v0.10.x (V1 engine)", false);
  v[4] = v1_rules("v0.11", "v0.11.x (V1 engine)", false);
  v[4].full_decode_graphs = true;
  v[4].graph_sizes_step16_above_256 = true;
  v[4].graph_sizes_capped_by_seqs = true;
  v[0].checked = "checked on 1 public startup (KV cache within 3%)";
  v[1].checked = "checked on 2 public startups (KV cache within 2.3%)";
  v[2].checked =
      "checked on 1 public startup, whose KV cache it overestimates by 22%: treat it as rough";
  v[3].checked = "not checked against a startup log of that release (taken from its release notes)";
  v[4].checked = v[3].checked;
  v[5] = VllmVersionRules{};
  v[5].name = "v0.19";
  v[5].releases = "v0.19.x (V1 engine)";
  return v;
}();

// The minor release each row stands for; v0.8 covers v0.8 and v0.9.
bool covers(const VllmVersionRules& r, uint32_t minor) {
  uint32_t first = 0;
  std::from_chars(r.name.data() + 3, r.name.data() + r.name.size(), first);
  return minor == first || (first == 8 && minor == 9);
}

}  // namespace

std::span<const VllmVersionRules> vllm_versions() {
  return k_versions;
}

const VllmVersionRules& vllm_latest_version() {
  return k_versions.back();
}

std::string vllm_supported_versions() {
  std::string out;
  for (const auto& r : k_versions) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} ({})", r.name, r.releases);
  }
  return out + "; latest = " + std::string(vllm_latest_version().name);
}

Expected<const VllmVersionRules*> parse_vllm_version(std::string_view text) {
  const std::string t = to_lower(trim(text));
  if (t.empty() || t == "latest") return &vllm_latest_version();
  std::string_view v = t;
  if (v.front() == 'v') v.remove_prefix(1);
  auto bad = [&] {
    return fail(ErrorKind::usage,
                fmt::format("--engine-version '{}' is not a modelled vLLM release; supported: {}",
                            text, vllm_supported_versions()));
  };
  uint32_t major = 0;
  uint32_t minor = 0;
  const char* end = v.data() + v.size();
  auto [p, ec] = std::from_chars(v.data(), end, major);
  if (ec != std::errc{} || p == end || *p != '.') return bad();
  auto [q, ec2] = std::from_chars(p + 1, end, minor);
  if (ec2 != std::errc{} || (q != end && *q != '.' && *q != 'r' && *q != 'p')) return bad();
  if (major != 0) return bad();
  for (const auto& r : k_versions) {
    if (covers(r, minor)) return &r;
  }
  return bad();
}

}  // namespace kvprof::estimate
