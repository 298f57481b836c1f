// llama.cpp's --fit (see fit.hpp), step by step as common_params_fit_impl (llama_params_fit_impl
// before b8882) does it, on one GPU or several:
//  1. the settings as given: done when every device keeps its target free;
//  2. the context, when -c was not given: measured again at --fit-ctx and interpolated linearly
//     between the two over all devices together (SWA caches are not linear, #18372), rounded
//     down to 256 cells; over several GPUs the target is lowered by the half layer (a sixth of
//     a MoE layer) each device is expected to waste, and the layer steps follow;
//  3. when -ngl, -ts (several GPUs) or an override was given, nothing more (llama.cpp aborts);
//  4-5. the layers (fit_layers.cpp): from the last GPU, as many as fit on each, then a MoE
//     model's full layers from the first GPU on.
// Several GPUs are planned as b7650 and later fit them (#18494 changed how the last GPU's layers
// overflow); before it a warning says so (plan.cpp).
#include "kvprof/engines/llamacpp/fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kvprof/engines/llamacpp/fit_layers.hpp"

namespace kvprof::engines {
namespace {

constexpr uint32_t k_fit_ctx_step = 256;

class Fitter {
 public:
  Fitter(const model::ModelSpec& m, const LlamaCppFitInput& in, const LlamaCppMeasure& measure,
         LlamaCppFitResult& r)
      : m_(m), in_(in), measure_(measure), r_(r) {
    prefix_ =
        in.build != 0 && in.build < 8882 ? "llama_params_fit_impl: " : "common_params_fit_impl: ";
    nd_ = !r.settings.has_gpu ? 0 : std::max<size_t>(1, r.settings.tensor_split.size());
    for (size_t id = 0; id < nd_; ++id)
      names_.push_back(fmt::format("CUDA{} ({})", id, in.gpu_name));
  }

  void run() {
    const auto full = dry_run(r_.settings);
    if (!full) {
      r_.success = false;
      return;
    }
    if (fits_as_given(*full)) return;
    if (fit_context(*full) && nd_ <= 1) return;
    if (nd_ == 0)
      return fail("was unable to fit model into system memory by reducing context, abort");
    if (in_.ngl_given) {
      return fail(
          fmt::format("n_gpu_layers already set by user to {}, abort", r_.settings.n_gpu_layers));
    }
    if (nd_ > 1 && in_.split_given)
      return fail("model_params::tensor_split already set by user, abort");
    if (in_.overrides_given)
      return fail("model_params::tensor_buft_overrides already set by user, abort");
    fit_llamacpp_layers({m_, in_, measure_, names_, [this](std::string l) { log(std::move(l)); }},
                        r_);
  }

 private:
  void log(std::string text) { r_.lines.push_back(prefix_ + std::move(text)); }
  void fail(const std::string& why) {
    r_.success = false;
    r_.lines.push_back(fmt::format(
        "{}failed to fit params to free device memory: {}",
        in_.build != 0 && in_.build < 8882 ? "llama_params_fit: " : "common_fit_params: ", why));
  }
  [[nodiscard]] bool before(uint32_t build) const { return in_.build != 0 && in_.build < build; }
  [[nodiscard]] int64_t free() const { return static_cast<int64_t>(in_.free_bytes); }
  [[nodiscard]] int64_t target() const { return static_cast<int64_t>(in_.target_bytes); }
  [[nodiscard]] size_t devices() const { return std::max<size_t>(1, nd_); }
  [[nodiscard]] bool moe() const { return m_.moe.n_expert > 0; }

  std::optional<LlamaCppDryRun> dry_run(const LlamaCppSettings& s) const {
    auto r = measure_(s);
    if (!r || r->used_bytes.size() != devices()) return std::nullopt;
    return r;
  }
  static int64_t sum_used(const LlamaCppDryRun& d) {
    return static_cast<int64_t>(
        std::accumulate(d.used_bytes.begin(), d.used_bytes.end(), uint64_t{0}));
  }

  // Step 1: true when every device keeps its target free as given.
  bool fits_as_given(const LlamaCppDryRun& full) {
    const int64_t used = sum_used(full);
    if (nd_ == 0) {
      log(fmt::format("projected to use {} MiB of host memory vs. {} MiB of total host memory",
                      fit_mib(used), fit_mib(free())));
    } else if (nd_ > 1) {
      log("projected memory use with initial parameters [MiB]:");
      for (size_t id = 0; id < nd_; ++id) {
        const auto u = static_cast<int64_t>(full.used_bytes[id]);
        log(before(7672)
                ? fmt::format("  - {}: {:6} total, {:6} used, {:6} {}", names_[id], fit_mib(free()),
                              fit_mib(u), fit_mib(std::abs(free() - u)),
                              free() >= u ? "surplus" : "deficit")
                : fmt::format("  - {}: {:6} total, {:6} used, {:6} free vs. target of {:6}",
                              names_[id], fit_mib(free()), fit_mib(u), fit_mib(free() - u),
                              fit_mib(target())));
      }
    }
    if (nd_ > 0) {
      log(fmt::format("projected to use {} MiB of device memory vs. {} MiB of free device memory",
                      fit_mib(used), fit_mib(free() * static_cast<int64_t>(nd_))));
    }
    int64_t least_free = INT64_MAX;
    for (const uint64_t u : full.used_bytes)
      least_free = std::min(least_free, free() - static_cast<int64_t>(u));
    if (least_free >= target()) {
      if (nd_ == 0) {
        log(fmt::format("will leave {} >= {} MiB of system memory, no changes needed",
                        fit_mib(least_free), fit_mib(target())));
      } else if (nd_ == 1) {
        log(fmt::format("will leave {} >= {} MiB of free device memory, no changes needed",
                        fit_mib(least_free), fit_mib(target())));
      } else if (before(7672)) {
        log(
            fmt::format("will leave at least {} >= {} MiB of free memory on all devices, no "
                        "changes needed",
                        fit_mib(least_free), fit_mib(target())));
      } else {
        log("targets for free memory can be met on all devices, no changes needed");
      }
      return true;
    }
    return false;
  }

  // Step 2: true when the context alone made it fit (over several GPUs: should make it fit).
  bool fit_context(const LlamaCppDryRun& full) {
    auto& s = r_.settings;
    const int64_t used_max = sum_used(full);
    const auto n_dev = static_cast<int64_t>(devices());
    const int64_t deficit = used_max - (free() - target()) * n_dev;
    if (deficit <= 0) return false;
    if (nd_ > 1) {
      log(before(7672)
              ? fmt::format("cannot fulfill margin of {} MiB on all devices, need to use {} MiB "
                            "less in total",
                            fit_mib(target()), fit_mib(deficit))
              : fmt::format("cannot meet free memory targets on all devices, need to use {} MiB "
                            "less in total",
                            fit_mib(deficit)));
    } else {
      log(before(7672) ? fmt::format("cannot fulfill margin of {} MiB, need to reduce device "
                                     "memory by {} MiB",
                                     fit_mib(target()), fit_mib(deficit))
                       : fmt::format("cannot meet free memory target of {} MiB, need to reduce "
                                     "device memory by {} MiB",
                                     fit_mib(target()), fit_mib(deficit)));
    }
    const uint32_t n_ctx_max = s.n_ctx;
    if (!in_.ctx_auto) {
      log(fmt::format("context size set by user to {} -> no change", s.n_ctx));
      return false;
    }
    if (n_ctx_max <= in_.n_ctx_min) {
      log(
          fmt::format("default model context size is {} which is <= the min. context size of {} "
                      "-> no change",
                      n_ctx_max, in_.n_ctx_min));
      return false;
    }
    int64_t used_target = (free() - target()) * n_dev;
    if (nd_ > 1) {
      // Only whole layers (a MoE model: whole tensors, about a third of a layer) go to a device:
      // half of one is expected to be wasted on each, and a little more is kept.
      const int64_t per_layer =
          static_cast<int64_t>(full.model_bytes) / std::max<int64_t>(1, m_.n_layer);
      used_target -= (n_dev + 1) * per_layer / (moe() ? 6 : 2);
    }
    LlamaCppSettings at_min = s;
    at_min.n_ctx = in_.n_ctx_min;
    const auto min = dry_run(at_min);
    if (!min) return false;
    const int64_t used_min = sum_used(*min);
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
      log(nd_ <= 1 ? "entire model can be fit by reducing context"
                   : "entire model should be fit across devices by reducing context");
      return true;
    }
    s.n_ctx = in_.n_ctx_min;
    log(fmt::format("context size reduced from {} to {} -> need {} MiB less memory in total",
                    n_ctx_max, s.n_ctx, fit_mib(used_max - used_min)));
    return false;
  }

  const model::ModelSpec& m_;
  const LlamaCppFitInput& in_;
  const LlamaCppMeasure& measure_;
  LlamaCppFitResult& r_;
  std::string prefix_;
  size_t nd_ = 0;  // GPUs; 0: the host alone
  std::vector<std::string> names_;
};

// What llama-fit-params prints (tools/fit-params): -c, -ngl, -ts where the fit split the layers
// over several GPUs (trailing zeros left out), and the overrides it set.
std::string fit_args(const LlamaCppFitResult& r, size_t given_overrides) {
  const auto& s = r.settings;
  std::string out = fmt::format("-c {} -ngl {}", s.n_ctx, s.n_gpu_layers);
  if (r.split_set) {
    size_t n = s.tensor_split.size();
    while (n > 1 && s.tensor_split[n - 1] == 0)
      --n;
    for (size_t id = 0; n > 1 && id < n; ++id)
      out +=
          fmt::format("{}{}", id == 0 ? " -ts " : ",", static_cast<uint32_t>(s.tensor_split[id]));
  }
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
                               const LlamaCppFitInput& in, const LlamaCppMeasure& measure) {
  LlamaCppFitResult r;
  r.settings = given;
  Fitter(model, in, measure, r).run();
  r.args = fit_args(r, given.tensor_overrides.size());
  return r;
}

}  // namespace kvprof::engines
