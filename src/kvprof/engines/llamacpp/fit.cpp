// llama.cpp's --fit for one device (see fit.hpp), step by step as common_params_fit_impl
// (llama_params_fit_impl before b8882) does it:
//  1. the settings as given: done when the device keeps the target free;
//  2. the context, when -c was not given: measured again at --fit-ctx and interpolated linearly
//     between the two (SWA caches are not linear, #18372), rounded down to 256 cells;
//  3. when -ngl, -ts or an override was given, nothing more (llama.cpp aborts that step);
//  4. a dense model: as many layers as fit, from the back (the output layer first, b7475);
//  5. a MoE model: with every expert on the host, either a surplus — all layers on the GPU and
//     the experts of the back layers on the host until it fits, then part of one more layer (the
//     first overflowing one keeps its up, then also its gate experts; failing the up experts,
//     its whole FFN goes to the host) — or a deficit — as many dense-only layers as fit (from
//     b7650 the lowest of them kept whole, #18494).
// Each search keeps the largest candidate that fits, as llama.cpp's false-position search ends.
// Not planned: fitting layers over several GPUs; a surplus smaller than one layer's experts
// (llama.cpp's search then starts from a whole first layer that does not fit, and ends elsewhere).
#include "kvprof/engines/llamacpp/fit.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kvprof::engines {
namespace {

constexpr uint64_t k_fit_mib = 1ULL << 20;
constexpr uint32_t k_fit_ctx_step = 256;

int64_t fit_mib(int64_t bytes) {
  return bytes / static_cast<int64_t>(k_fit_mib);
}

// The experts of layer `il` as common/fit.cpp names them (gate_up from b8497, #20910).
std::string expert_pattern(uint32_t il, uint32_t build) {
  return build != 0 && build < 8497
             ? fmt::format("blk\\.{}\\.ffn_(up|down|gate)_(ch|)exps", il)
             : fmt::format("blk\\.{}\\.ffn_(up|down|gate_up|gate)_(ch|)exps", il);
}

// What of layer `il` goes to the host when llama.cpp keeps only part of it on the device
// (common/fit.cpp's layer fractions; gate_up from b8497 as in expert_pattern).
enum class LayerPart { attention, up, gate };
std::string partial_layer_pattern(uint32_t il, LayerPart kept, uint32_t build) {
  const bool before_gate_up = build != 0 && build < 8497;
  const char* ffn = "ffn_down";
  if (kept == LayerPart::attention)
    ffn = before_gate_up ? "ffn_(up|gate|down)" : "ffn_(gate|up|gate_up|down)";
  if (kept == LayerPart::up) ffn = before_gate_up ? "ffn_(gate|down)" : "ffn_(gate|gate_up|down)";
  return fmt::format("blk\\.{}\\.{}.*", il, ffn);
}

// `s` with the experts of layers [first, last) on the host.
LlamaCppSettings experts_on_host(LlamaCppSettings s, uint32_t first, uint32_t last,
                                 uint32_t build) {
  for (uint32_t il = first; il < last; ++il)
    s.tensor_overrides.push_back({expert_pattern(il, build), "CPU"});
  return s;
}

// The largest n in [lo, hi] for which `fits(n)` holds, `fits` holding for all n up to it; lo - 1
// (as a signed value) when none does.
template <class Fits>
int64_t largest_fitting(int64_t lo, int64_t hi, const Fits& fits) {
  if (!fits(lo)) return lo - 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

class Fitter {
 public:
  Fitter(const model::ModelSpec& m, const LlamaCppFitInput& in, const LlamaCppDeviceUse& use,
         LlamaCppFitResult& r)
      : m_(m), in_(in), use_(use), r_(r) {
    prefix_ =
        in.build != 0 && in.build < 8882 ? "llama_params_fit_impl: " : "common_params_fit_impl: ";
  }

  void log(std::string text) { r_.lines.push_back(prefix_ + std::move(text)); }

  // The device memory `s` leaves free (negative: short); nullopt when it cannot be planned.
  std::optional<int64_t> left(const LlamaCppSettings& s) const {
    const auto used = use_(s);
    if (!used) return std::nullopt;
    return static_cast<int64_t>(in_.free_bytes) - static_cast<int64_t>(*used);
  }
  bool meets_target(const LlamaCppSettings& s) const {
    const auto l = left(s);
    return l && *l >= static_cast<int64_t>(in_.target_bytes);
  }
  // As llama.cpp tests a partial layer: strictly below the device's target.
  bool under_target(const LlamaCppSettings& s) const {
    const auto l = left(s);
    return l && *l > static_cast<int64_t>(in_.target_bytes);
  }
  int64_t used_mib(const LlamaCppSettings& s) const {
    const auto u = use_(s);
    return u ? fit_mib(static_cast<int64_t>(*u)) : 0;
  }

  void run() {
    auto& s = r_.settings;
    const auto target = static_cast<int64_t>(in_.target_bytes);
    const auto used0 = use_(s);
    if (!used0) {
      r_.success = false;
      return;
    }
    const auto free = static_cast<int64_t>(in_.free_bytes);
    const auto used = static_cast<int64_t>(*used0);
    const char* where = in_.free_bytes > 0 && !s.has_gpu ? "host" : "device";
    log(fmt::format("projected to use {} MiB of {} memory vs. {} MiB of free {} memory",
                    fit_mib(used), where, fit_mib(free), where));
    if (free - used >= target) {
      log(fmt::format("will leave {} >= {} MiB of free {} memory, no changes needed",
                      fit_mib(free - used), fit_mib(target), where));
      return;
    }
    log(in_.build != 0 && in_.build < 7681
            ? fmt::format("cannot fulfill margin of {} MiB, need to reduce device memory by {} MiB",
                          fit_mib(target), fit_mib(used - (free - target)))
            : fmt::format("cannot meet free memory target of {} MiB, need to reduce device memory "
                          "by {} MiB",
                          fit_mib(target), fit_mib(used - (free - target))));
    if (fit_context(used)) return;
    if (!s.has_gpu) return fail("was unable to fit model into system memory by reducing context");
    if (in_.layers_given) return fail("n_gpu_layers or tensor overrides already set by user");
    if (m_.moe.n_expert > 0) {
      fit_moe_layers();
    } else {
      fit_dense_layers();
    }
  }

 private:
  void fail(const std::string& why) {
    r_.success = false;
    r_.lines.push_back(fmt::format(
        "{}failed to fit params to free device memory: {}, abort",
        in_.build != 0 && in_.build < 8882 ? "llama_params_fit: " : "common_fit_params: ", why));
  }

  // Step 2: true when the context alone made it fit.
  bool fit_context(int64_t used_max) {
    auto& s = r_.settings;
    const uint32_t n_ctx_max = s.n_ctx;
    if (!in_.ctx_auto || n_ctx_max <= in_.n_ctx_min) return false;
    const int64_t used_target =
        static_cast<int64_t>(in_.free_bytes) - static_cast<int64_t>(in_.target_bytes);
    LlamaCppSettings at_min = s;
    at_min.n_ctx = in_.n_ctx_min;
    const auto used_min_opt = use_(at_min);
    if (!used_min_opt) return false;
    const auto used_min = static_cast<int64_t>(*used_min_opt);
    r_.changed = true;
    if (used_target > used_min && used_max > used_min) {
      const auto span = static_cast<int64_t>(n_ctx_max - in_.n_ctx_min);
      int64_t n_ctx = in_.n_ctx_min + span * (used_target - used_min) / (used_max - used_min);
      n_ctx -= n_ctx % k_fit_ctx_step;
      n_ctx = std::max<int64_t>(n_ctx, in_.n_ctx_min);
      s.n_ctx = static_cast<uint32_t>(n_ctx);
      const int64_t per_ctx = (used_max - used_min) / std::max<int64_t>(span, 1);
      log(fmt::format("context size reduced from {} to {} -> need {} MiB less memory in total",
                      n_ctx_max, s.n_ctx, fit_mib((n_ctx_max - n_ctx) * per_ctx)));
      log("entire model can be fit by reducing context");
      return true;
    }
    s.n_ctx = in_.n_ctx_min;
    log(fmt::format("context size reduced from {} to {} -> need {} MiB less memory in total",
                    n_ctx_max, s.n_ctx, fit_mib(used_max - used_min)));
    return false;
  }

  // Every layer -ngl counts: the output layer is one from b7475 (#18148), offloaded first.
  [[nodiscard]] uint32_t all_layers() const {
    return m_.n_layer + (in_.build != 0 && in_.build < 7475 ? 0 : 1);
  }

  // Step 4: the most layers that fit, the output layer first.
  void fit_dense_layers() {
    auto& s = r_.settings;
    log("filling dense layers back-to-front:");
    const int64_t k = largest_fitting(0, all_layers(), [&](int64_t n) {
      LlamaCppSettings t = s;
      t.n_gpu_layers = static_cast<int32_t>(n);
      return meets_target(t);
    });
    s.n_gpu_layers = static_cast<int32_t>(std::max<int64_t>(k, 0));
    r_.changed = true;
    log(fmt::format("  - {}: {:2} layers, {:6} MiB used, {:6} MiB free", in_.device, s.n_gpu_layers,
                    used_mib(s), fit_mib(left(s).value_or(0))));
    if (k < 0) fail("not even the compute buffers fit on the device");
  }

  // Step 5: the experts of the back layers to the host until the rest fits, or dense-only layers.
  void fit_moe_layers() {
    auto& s = r_.settings;
    const uint32_t n = m_.n_layer;
    LlamaCppSettings all_dense = experts_on_host(s, 0, n, in_.build);
    all_dense.n_gpu_layers = static_cast<int32_t>(all_layers());
    const int64_t surplus =
        left(all_dense).value_or(INT64_MIN / 2) - static_cast<int64_t>(in_.target_bytes);
    r_.changed = true;
    if (surplus > 0) {
      log(
          fmt::format("with only dense weights in device memory there is a total surplus of {} "
                      "MiB",
                      fit_mib(surplus)));
      log("converting dense-only layers to full layers and filling them front-to-back with "
          "overflow to next device/system memory:");
      // Full layers [0, full) on the device; the experts of [full, n) on the host.
      const int64_t full = largest_fitting(0, n, [&](int64_t f) {
        LlamaCppSettings t = experts_on_host(s, static_cast<uint32_t>(f), n, in_.build);
        t.n_gpu_layers = static_cast<int32_t>(all_layers());
        return meets_target(t);
      });
      const size_t given_overrides = s.tensor_overrides.size();
      s = experts_on_host(s, static_cast<uint32_t>(std::max<int64_t>(full, 0)), n, in_.build);
      s.n_gpu_layers = static_cast<int32_t>(all_layers());
      if (full >= 0 && full < n) keep_part_of_layer(static_cast<uint32_t>(full), given_overrides);
      // The partial layers llama.cpp counts: from b7475 the output layer's slot is among them
      // (set_ngl_tensor_split_tbo gives them the highest indices; its patterns match nothing).
      const auto n_full = static_cast<uint32_t>(std::max<int64_t>(full, 0));
      log(fmt::format("  - {}: {:2} layers ({:2} overflowing), {:6} MiB used, {:6} MiB free",
                      in_.device, all_layers(), n_full >= n ? 0 : all_layers() - n_full,
                      used_mib(s), fit_mib(left(s).value_or(0))));
      return;
    }
    log(
        fmt::format("with only dense weights in device memory there is still a total deficit of "
                    "{} MiB",
                    fit_mib(-surplus)));
    log("filling dense-only layers back-to-front:");
    const uint32_t out = all_layers() - n;  // 1 when -ngl counts the output layer
    // The first layer whose experts go to the host when the last `gpu` layers (the output first)
    // are on the device: every one of them until b7650; from b7650 (#18494, the search counting
    // the output as the one layer always kept whole) the lowest of them keeps its experts.
    const uint32_t whole = in_.build == 0 || in_.build >= 7650 ? 1 : 0;
    const auto first_dense_only = [&](uint32_t gpu) {
      return gpu <= out ? n : std::min(n, n + out - std::min(gpu, n + out) + whole);
    };
    const int64_t k = largest_fitting(0, all_layers(), [&](int64_t g) {
      const auto gpu = static_cast<uint32_t>(g);
      LlamaCppSettings t = experts_on_host(s, first_dense_only(gpu), n, in_.build);
      t.n_gpu_layers = static_cast<int32_t>(gpu);
      return meets_target(t);
    });
    const auto gpu = static_cast<uint32_t>(std::max<int64_t>(k, 0));
    s = experts_on_host(s, first_dense_only(gpu), n, in_.build);
    s.n_gpu_layers = static_cast<int32_t>(gpu);
    log(fmt::format("  - {}: {:2} layers, {:6} MiB used, {:6} MiB free", in_.device, gpu,
                    used_mib(s), fit_mib(left(s).value_or(0))));
    if (k < 0) fail("not even the compute buffers fit on the device");
  }

  // Part of one more layer on the device (from b7407, with the fit itself): the first overflowing
  // layer `il`, whose experts' override is tensor_overrides[at], keeps its up experts, then its
  // gate experts too, where the device stays under its target; failing the up experts, its whole
  // FFN goes to the host (attention alone stays).
  void keep_part_of_layer(uint32_t il, size_t at) {
    auto& s = r_.settings;
    LlamaCppSettings t = s;
    t.tensor_overrides[at].pattern = partial_layer_pattern(il, LayerPart::up, in_.build);
    if (under_target(t)) {
      s = t;
      t.tensor_overrides[at].pattern = partial_layer_pattern(il, LayerPart::gate, in_.build);
      if (under_target(t)) s = t;
      return;
    }
    t.tensor_overrides[at].pattern = partial_layer_pattern(il, LayerPart::attention, in_.build);
    if (under_target(t)) s = t;
  }

  const model::ModelSpec& m_;
  const LlamaCppFitInput& in_;
  const LlamaCppDeviceUse& use_;
  LlamaCppFitResult& r_;
  std::string prefix_;
};

// What llama-fit-params prints (tools/fit-params): -c, -ngl and the overrides it set.
std::string fit_args(const LlamaCppFitResult& r, size_t given_overrides) {
  const auto& s = r.settings;
  std::string out = fmt::format("-c {} -ngl {}", s.n_ctx, s.n_gpu_layers);
  if (s.tensor_overrides.size() > given_overrides) {
    out += " -ot \"";
    for (size_t i = given_overrides; i < s.tensor_overrides.size(); ++i) {
      const auto& o = s.tensor_overrides[i];
      out += fmt::format("{}{}={}", i == given_overrides ? "" : ",", o.pattern, o.buffer_type);
    }
    out += "\"";
  }
  return out;
}

}  // namespace

LlamaCppFitResult fit_llamacpp(const model::ModelSpec& model, const LlamaCppSettings& given,
                               const LlamaCppFitInput& in, const LlamaCppDeviceUse& use) {
  LlamaCppFitResult r;
  r.settings = given;
  Fitter(model, in, use, r).run();
  r.args = fit_args(r, given.tensor_overrides.size());
  return r;
}

}  // namespace kvprof::engines
