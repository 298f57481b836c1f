// The modelled vLLM releases (see releases.hpp); the facts behind each row are cited in
// docs/architecture.md, "vLLM versions".
#include "kvprof/engines/vllm/releases.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>

#include "kvprof/util/strings.hpp"

namespace kvprof::engines {

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
  r.batch_defaults = VllmBatchDefaults::fixed;
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

// The dummy sampler of the profile run costs more per logit in early V1 up to v0.16
// (fitted on the v0.10.2 and v0.15/v0.16 startups that print the activation peak, and borne out
// by v0.8's; v0.19's 12.5 holds from v0.17).
constexpr double k_sampler_bytes_v0_10 = 32.0;
constexpr double k_sampler_bytes_v0_15 = 36.0;

constexpr VllmVersionRules v1_rules(std::string_view name, std::string_view releases, bool early,
                                    VllmBatchDefaults batch) {
  VllmVersionRules r;
  r.name = name;
  r.releases = releases;
  r.charges_cuda_context = early;
  r.hybrid_kv_groups = !early;
  r.batch_defaults = batch;
  r.full_decode_graphs = false;  // PIECEWISE graphs only before v0.11
  r.graph_sizes_step16_above_256 = false;
  r.graph_sizes_capped_by_seqs = false;
  r.log_style = early ? VllmLogStyle::v1_early : VllmLogStyle::v1;
  r.sampler_bytes_per_logit = k_sampler_bytes_v0_10;
  return r;
}

constexpr std::array<VllmVersionRules, 10> k_vllm_versions = [] {
  std::array<VllmVersionRules, 10> v{};
  v[0] = v0_rules("v0.6", "v0.6.0 - v0.6.4 (V0 engine)", true, 512, VllmLogStyle::v0_6);
  v[1] = v0_rules("v0.7", "v0.6.5 - v0.7.x (V0 engine)", false, 2048, VllmLogStyle::v0_7);
  v[2] = v1_rules("v0.8", "v0.8.0 - v0.8.4 (V1 engine)", true, VllmBatchDefaults::h100_by_name);
  v[3] = v1_rules("v0.8.5", "v0.8.5 (V1 engine)", true, VllmBatchDefaults::by_memory);
  v[4] = v1_rules("v0.9", "v0.9.0 (V1 engine)", true, VllmBatchDefaults::by_memory_not_a100);
  v[5] = v1_rules("v0.10", "v0.9.1 - v0.10.x (V1 engine)", false,
                  VllmBatchDefaults::by_memory_not_a100);
  v[5].graph_sizes_capped_by_seqs = true;  // #20628 (v0.10.0): sizes up to 2 x max_num_seqs
  v[6] = v1_rules("v0.11", "v0.11.0 (V1 engine)", false, VllmBatchDefaults::by_memory_not_a100);
  v[6].full_decode_graphs = true;  // #25444: FULL_AND_PIECEWISE by default
  v[6].graph_sizes_capped_by_seqs = true;
  // #26016 (v0.11.1 or v0.11.2): capture sizes in steps of 16 above 256; no budget rule changes
  // again until v0.17.
  v[7] = VllmVersionRules{};
  v[7].name = "v0.15";
  v[7].releases = "v0.11.1 - v0.16.x (V1 engine)";
  v[7].sampler_bytes_per_logit = k_sampler_bytes_v0_15;
  v[0].checked = "checked on 3 public startups (KV cache within 3%)";
  v[1].checked = "checked on 2 public startups (KV cache within 2.3%)";
  v[2].checked = "checked on 1 public startup (KV cache within 3.4%)";
  v[3].checked =
      "checked on 3 public startups of v0.8.5.post1 (KV cache within 2.4%; two GPUs inferred "
      "from the figures)";
  v[4].checked = "read from vLLM's source on v0.9.0's release date; not checked against a startup";
  v[5].checked = "checked on 3 public startups of v0.10.1 and v0.10.2";
  v[6].checked = "checked on 1 public startup of v0.11.0";
  v[7].checked = "checked on 2 public startups (v0.15.0, v0.16.0) of one model";
  v[8] = VllmVersionRules{};
  v[8].name = "v0.19";
  v[8].releases = "v0.17.x - v0.19.x (V1 engine)";
  // #38284 (in v0.20.0): the estimated CUDA graph memory comes out of the KV budget and the
  // default gpu_memory_utilization rises to 0.92.
  v[9] = VllmVersionRules{};
  v[9].name = "v0.20";
  v[9].releases = "v0.20.x and later (V1 engine; Model Runner V2 not modelled)";
  v[9].budget_holds_cuda_graphs = true;
  v[9].default_gpu_memory_utilization = 0.92;
  v[9].checked =
      "read from vLLM's source and two v0.20.0 startups of a quantized hybrid model; not checked "
      "against a dense model's startup";
  return v;
}();

// The row of `patch` release 0.`minor`.`patch`: rows split v0.6 at v0.6.5, v0.8 at v0.8.5,
// v0.9 at v0.9.1 (a v0.9.1 log prints #19312's "Available KV cache memory") and v0.11 at
// v0.11.1.
const VllmVersionRules* vllm_row_for(uint32_t minor, uint32_t patch) {
  switch (minor) {
    case 6:
      return &k_vllm_versions[patch < 5 ? 0 : 1];
    case 7:
      return &k_vllm_versions[1];
    case 8:
      return &k_vllm_versions[patch < 5 ? 2 : 3];
    case 9:
      return &k_vllm_versions[patch < 1 ? 4 : 5];
    case 10:
      return &k_vllm_versions[5];
    case 11:
      return &k_vllm_versions[patch == 0 ? 6 : 7];
    case 12:
    case 13:
    case 14:
    case 15:
    case 16:
      return &k_vllm_versions[7];
    case 17:
    case 18:
    case 19:
      return &k_vllm_versions[8];
    default:
      return minor >= 20 && minor < 100 ? &k_vllm_versions[9] : nullptr;
  }
}

}  // namespace

std::span<const VllmVersionRules> vllm_versions() {
  return k_vllm_versions;
}

const VllmVersionRules& vllm_latest_version() {
  return k_vllm_versions.back();
}

const VllmVersionRules& vllm_default_version() {
  return k_vllm_versions[8];
}

std::string vllm_supported_versions() {
  std::string out;
  for (const auto& r : k_vllm_versions) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} ({})", r.name, r.releases);
  }
  return out + fmt::format("; default {}, latest = {}", vllm_default_version().name,
                           vllm_latest_version().name);
}

Expected<const VllmVersionRules*> parse_vllm_version(std::string_view text) {
  const std::string t = to_lower(trim(text));
  if (t.empty()) return &vllm_default_version();
  if (t == "latest") return &vllm_latest_version();
  std::string_view v = t;
  if (v.front() == 'v') v.remove_prefix(1);
  auto bad = [&] {
    return fail(ErrorKind::usage,
                fmt::format("--engine-version '{}' is not a modelled vLLM release; supported: {}",
                            text, vllm_supported_versions()));
  };
  uint32_t major = 0;
  uint32_t minor = 0;
  uint32_t patch = 0;
  const char* end = v.data() + v.size();
  auto [p, ec] = std::from_chars(v.data(), end, major);
  if (ec != std::errc{} || p == end || *p != '.') return bad();
  auto [q, ec2] = std::from_chars(p + 1, end, minor);
  if (ec2 != std::errc{} || (q != end && *q != '.' && *q != 'r' && *q != 'p')) return bad();
  if (q != end && *q == '.') {
    auto [rest, ec3] = std::from_chars(q + 1, end, patch);
    if (ec3 != std::errc{}) return bad();
    (void)rest;
  }
  if (major != 0) return bad();
  if (const VllmVersionRules* r = vllm_row_for(minor, patch)) return r;
  return bad();
}

}  // namespace kvprof::engines
