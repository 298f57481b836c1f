// The modelled SGLang releases (see releases.hpp); the source lines behind each row are
// cited in docs/architecture.md, "SGLang versions".
#include "kvprof/engines/sglang/releases.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

#include "kvprof/util/strings.hpp"

namespace kvprof::engines {

namespace {

constexpr uint64_t k_gib_in_mib = 1024;

constexpr SglangVersionRules rules(std::string_view name, std::string_view releases,
                                   SglangFractionRule rule) {
  SglangVersionRules r;
  r.name = name;
  r.releases = releases;
  r.fraction_rule = rule;
  return r;
}

constexpr std::array<SglangVersionRules, 6> k_sglang_versions = [] {
  std::array<SglangVersionRules, 6> v{};
  v[0] = rules("v0.3", "v0.2.x - v0.3.x", SglangFractionRule::tp_table);
  v[0].tp8_fraction = 0.83;
  v[1] = rules("v0.4", "v0.4.0 - v0.4.5", SglangFractionRule::tp_table);
  v[2] = rules("v0.4.6", "v0.4.6 - v0.4.7", SglangFractionRule::tp_table_large);
  v[2].table_by_tp_times_pp = true;
  v[3] = rules("v0.4.7.post1", "v0.4.7.post1 - v0.4.9.post2", SglangFractionRule::reserve_tiers);
  v[4] = rules("v0.4.9.post3", "v0.4.9.post3 - v0.5.2", SglangFractionRule::reserve_tiers);
  v[4].vlm_adjust = true;
  v[5] = rules("v0.5.3", "v0.5.3 and later", SglangFractionRule::reserve_formula);
  v[5].vlm_adjust = true;
  v[0].checked =
      "read from v0.3.4's source; checked on 3 public startups of 2024-10/11 (KV cache within "
      "1.1%)";
  v[1].checked = "checked on 4 public startups (v0.4.1 - v0.4.4)";
  v[2].checked =
      "read from v0.4.6.post2's and v0.4.7's source; its default fraction checked on 1 public "
      "startup (no KV figure)";
  v[3].checked =
      "read from v0.4.8's source; checked on 1 public startup and the default fraction of "
      "another";
  v[4].checked = "read from v0.4.10's and v0.5.2's source; checked on 2 public startups";
  v[5].checked =
      "read from v0.5.3's and v0.5.6's source (later releases size the CUDA-graph reserve "
      "differently); checked on 1 public startup with the fraction given";
  return v;
}();

// The fraction of a TP-size table (v0.2 - v0.4.7).
double table_fraction(uint32_t parallel, double tp8) {
  if (parallel >= 16) return 0.79;
  if (parallel >= 8) return tp8;
  if (parallel >= 4) return 0.85;
  if (parallel >= 2) return 0.87;
  return 0.88;
}

double round3(double x) {
  return std::round(x * 1000.0) / 1000.0;
}

// The largest batch size of the default CUDA-graph capture list before v0.5.3
// (cuda_graph_runner.py): 160, then to 256 above 90 GiB and to 512 above 160,000 MiB.
uint32_t capture_list_max(uint64_t gpu_mib) {
  if (gpu_mib > 160'000) return 512;
  if (gpu_mib > 90 * k_gib_in_mib) return 256;
  return 160;
}

void fill_tp_table(const SglangVersionRules& r, const SglangDefaultsInput& in, SglangDefaults& d) {
  const uint64_t gpu = in.gpu_memory_mib;
  const bool old = r.tp8_fraction > 0.82;  // v0.3: 8192 tokens and 160 graphs everywhere
  d.chunked_prefill_size = !old && gpu < 25'000 ? 2048 : 8192;
  if (r.fraction_rule == SglangFractionRule::tp_table_large && gpu > 180'000) {
    d.chunked_prefill_size = 16384;
  }
  d.cuda_graph_max_bs = !old && gpu < 25'000 ? (in.tp < 4 ? 8 : 80) : 160;
  const uint32_t parallel = r.table_by_tp_times_pp ? in.tp * in.pp : in.tp;
  if (r.fraction_rule == SglangFractionRule::tp_table) {
    d.mem_fraction_static = table_fraction(parallel, r.tp8_fraction);
    return;
  }
  // v0.4.6.post2 - v0.4.7: the table up to 80 GiB, 0.88 above; B200-class GPUs 0.79, others
  // above 96 GiB keep at least 18 GiB (20 with speculative decoding) out of the static pool.
  double f = gpu <= 81'920 ? table_fraction(parallel, r.tp8_fraction) : 0.88;
  const auto g = static_cast<double>(gpu);
  if (gpu > 180'000) {
    f = 0.79;
  } else if (gpu > 96 * k_gib_in_mib) {
    const double reserve_mib = in.speculative ? 20.0 * 1024 : 18.0 * 1024;
    f = std::min(f + 48.0 * 1024 * (1 - f) / g, (g - reserve_mib) / g);
  } else if (in.speculative) {
    f *= 0.95;
  }
  d.mem_fraction_static = f;
}

void fill_reserve_tiers(const SglangDefaultsInput& in, SglangDefaults& d) {
  const uint64_t gpu = in.gpu_memory_mib;
  const double parallel = static_cast<double>(in.tp) * in.pp;
  double reserved_gib = 0;
  if (gpu < 35 * k_gib_in_mib) {
    reserved_gib = 2.8 + parallel / 10;
  } else if (gpu < 90 * k_gib_in_mib) {
    reserved_gib = 9.5 + parallel / 2;
  } else if (gpu < 160 * k_gib_in_mib) {
    reserved_gib = 12 + parallel / 2;
  } else {
    reserved_gib = 32;
  }
  if (in.speculative) reserved_gib += 2;
  const auto g = static_cast<double>(gpu);
  d.mem_fraction_static = round3((g - reserved_gib * 1024) / g);
  d.chunked_prefill_size = gpu < 35 * k_gib_in_mib ? 2048 : gpu < 160 * k_gib_in_mib ? 8192 : 16384;
  d.cuda_graph_max_bs = gpu < 35 * k_gib_in_mib ? (in.tp < 4 ? 8 : 80) : capture_list_max(gpu);
}

void fill_reserve_formula(const SglangDefaultsInput& in, SglangDefaults& d) {
  const uint64_t gpu = in.gpu_memory_mib;
  const bool small_tp = in.tp < 4;
  if (gpu < 20 * k_gib_in_mib) {
    d.chunked_prefill_size = 2048;
    d.cuda_graph_max_bs = 8;
  } else if (gpu < 35 * k_gib_in_mib) {
    d.chunked_prefill_size = 2048;
    d.cuda_graph_max_bs = small_tp ? 16 : 80;
  } else if (gpu < 60 * k_gib_in_mib) {
    d.chunked_prefill_size = 4096;
    d.cuda_graph_max_bs = small_tp ? 32 : 160;
  } else if (gpu < 160 * k_gib_in_mib) {
    d.chunked_prefill_size = 8192;
    d.cuda_graph_max_bs = small_tp ? 256 : 512;
  } else {
    d.chunked_prefill_size = 16384;
    d.cuda_graph_max_bs = 512;
  }
  if (in.chunked_prefill_size) d.chunked_prefill_size = *in.chunked_prefill_size;
  if (in.cuda_graph_max_bs) d.cuda_graph_max_bs = *in.cuda_graph_max_bs;
  // MiB: attention metadata, the activations of the largest prefill chunk, the CUDA graphs and
  // the communication buffers of large parallel sizes.
  double reserved = 512 + std::max<double>(d.chunked_prefill_size, 2048) * 1.5 +
                    d.cuda_graph_max_bs * 2.0 + static_cast<double>(in.tp) * in.pp / 8 * 1024;
  if (gpu > 60 * k_gib_in_mib) reserved = std::max(reserved, 10.0 * 1024);
  if (in.speculative) reserved += 2 * 1024;
  const auto g = static_cast<double>(gpu);
  d.mem_fraction_static = round3((g - reserved) / g);
}

// adjust_mem_fraction_for_vlm: 5% less, and 10% less again for each ViT-L/14 (24 layers of
// 1024) the vision tower's layers x hidden^2 is larger (a factor kept within 0.8 - 1.05).
double vlm_factor(const SglangDefaultsInput& in) {
  const double current = static_cast<double>(in.vision_layers) * in.vision_hidden_size *
                         static_cast<double>(in.vision_hidden_size);
  const double baseline = 24.0 * 1024 * 1024;
  const double adjust = std::clamp(1.0 - 0.1 * (current / baseline - 1.0), 0.8, 1.05);
  return 0.95 * adjust;
}

// "0.4.7.post1" -> {0, 4, 7, 1}; false when it is not such a version.
bool split_version(std::string_view v, std::array<uint32_t, 4>& out) {
  out[3] = 0;
  const auto rest = read_version_numbers(v, std::span<uint32_t>(out.data(), 3));
  if (!rest) return false;
  if (rest->empty()) return true;
  if (rest->starts_with("post")) {
    const char* end = rest->data() + rest->size();
    auto [q, ec] = std::from_chars(rest->data() + 4, end, out[3]);
    return ec == std::errc{} && q == end;
  }
  return rest->starts_with("rc") || rest->starts_with("dev");
}

}  // namespace

SglangDefaults sglang_defaults(const SglangVersionRules& r, const SglangDefaultsInput& in) {
  SglangDefaults d;
  switch (r.fraction_rule) {
    case SglangFractionRule::tp_table:
    case SglangFractionRule::tp_table_large:
      fill_tp_table(r, in, d);
      break;
    case SglangFractionRule::reserve_tiers:
      fill_reserve_tiers(in, d);
      break;
    case SglangFractionRule::reserve_formula:
      fill_reserve_formula(in, d);
      break;
  }
  if (in.chunked_prefill_size) d.chunked_prefill_size = *in.chunked_prefill_size;
  if (in.cuda_graph_max_bs) d.cuda_graph_max_bs = *in.cuda_graph_max_bs;
  if (r.vlm_adjust && in.vision_layers > 0) d.mem_fraction_static *= vlm_factor(in);
  return d;
}

std::span<const SglangVersionRules> sglang_versions() {
  return k_sglang_versions;
}

const SglangVersionRules& sglang_latest_version() {
  return k_sglang_versions.back();
}

std::string sglang_supported_versions() {
  std::string out;
  for (const auto& r : k_sglang_versions) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} ({})", r.name, r.releases);
  }
  return out + "; latest = " + std::string(sglang_latest_version().name);
}

Expected<const SglangVersionRules*> parse_sglang_version(std::string_view text) {
  const std::string t = to_lower(trim(text));
  if (t.empty() || t == "latest") return &sglang_latest_version();
  std::string_view v = t;
  if (v.front() == 'v') v.remove_prefix(1);
  std::array<uint32_t, 4> n{};
  if (!split_version(v, n) || n[0] != 0 || n[1] < 2 || n[1] > 5) {
    return fail(ErrorKind::usage,
                fmt::format("--engine-version '{}' is not a modelled SGLang release; supported: {}",
                            text, sglang_supported_versions()));
  }
  const auto [major, minor, patch, post] = n;
  (void)major;
  size_t row = 5;
  if (minor <= 3) {
    row = 0;
  } else if (minor == 4) {
    if (patch <= 5) {
      row = 1;
    } else if (patch == 6 || (patch == 7 && post == 0)) {
      row = 2;
    } else if (patch < 9 || (patch == 9 && post < 3)) {
      row = 3;
    } else {
      row = 4;
    }
  } else if (patch < 3) {
    row = 4;
  }
  return &k_sglang_versions[row];
}

}  // namespace kvprof::engines
