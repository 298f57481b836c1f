// The layer steps of llama.cpp's --fit (see fit_layers.hpp), step by step as common/fit.cpp's
// false-position searches take them: a layer's size varies with a quantization mix (Q6_K in some
// layers) and op offload copies the output layer's matrix to the GPU while that layer stays on
// the host, so the memory need not grow with the count, and where a search ends depends on the
// steps it took. The release differences in them: the output layer counted from b7475 (#18148),
// the memory of a candidate that fitted whole kept from b7460 (#18136), the last GPU's search a
// layer short from b7560 to b7649 (#18415), the lowest of the last GPU's layers kept whole and
// the overflow of one more layer to the next GPU from b7650 (#18494), gate_up in the expert
// pattern from b8497 (#20910).
#include "kvprof/engines/llamacpp/fit_layers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>

namespace kvprof::engines {
namespace {

// The experts of layer `il` as common/fit.cpp names them (gate_up from b8497, #20910).
std::string expert_pattern(uint32_t il, uint32_t build) {
  return build != 0 && build < 8497
             ? fmt::format("blk\\.{}\\.ffn_(up|down|gate)_(ch|)exps", il)
             : fmt::format("blk\\.{}\\.ffn_(up|down|gate_up|gate)_(ch|)exps", il);
}

// What of a partial layer stays on its device (common/fit.cpp's layer fractions): the dense
// weights (every expert leaves), the attention, also the up experts, also the gate experts.
enum class LayerPart { dense, attention, up, gate };

// The tensors of layer `il` that leave its device when `kept` stays (gate_up from b8497).
std::string leaving_pattern(uint32_t il, LayerPart kept, uint32_t build) {
  if (kept == LayerPart::dense) return expert_pattern(il, build);
  const bool before_gate_up = build != 0 && build < 8497;
  const char* ffn = "ffn_down";
  if (kept == LayerPart::attention)
    ffn = before_gate_up ? "ffn_(up|gate|down)" : "ffn_(gate|up|gate_up|down)";
  if (kept == LayerPart::up) ffn = before_gate_up ? "ffn_(gate|down)" : "ffn_(gate|gate_up|down)";
  return fmt::format("blk\\.{}\\.{}.*", il, ffn);
}

// One device's layers as llama.cpp counts them: n_layer in all, the last n_part of them partial
// (the first partial one keeps `kept`, the others only their dense weights).
struct DeviceLayers {
  uint32_t n_layer = 0;
  uint32_t n_part = 0;
  LayerPart kept = LayerPart::dense;
  [[nodiscard]] uint32_t n_full() const { return n_layer - n_part; }
};
using Layout = std::vector<DeviceLayers>;

class LayerFitter {
 public:
  LayerFitter(const FitLayersContext& ctx, LlamaCppFitResult& r)
      : m_(ctx.model), in_(ctx.in), ctx_(ctx), r_(r), nd_(ctx.gpu_names.size()) {}

  // Steps 4 and 5.
  void run() {
    r_.changed = true;
    int64_t surplus = 0;
    if (moe()) {
      // Every expert on the host, the default split.
      LlamaCppSettings dense_only = r_.settings;
      dense_only.tensor_overrides.push_back(
          {before(8497) ? "blk\\.\\d+\\.ffn_(up|down|gate)_(ch|)exps"
                        : "blk\\.\\d+\\.ffn_(up|down|gate_up|gate)_(ch|)exps",
           "CPU"});
      const auto d = ctx_.measure(dense_only);
      surplus = INT64_MIN / 2;
      if (d && d->used_bytes.size() == nd_) {
        surplus = 0;
        for (const uint64_t u : d->used_bytes)
          surplus += free() - static_cast<int64_t>(u) - target();
      }
      log(surplus > 0
              ? fmt::format("with only dense weights in device memory there is a total surplus "
                            "of {} MiB",
                            fit_mib(surplus))
              : fmt::format("with only dense weights in device memory there is still a total "
                            "deficit of {} MiB",
                            fit_mib(-surplus)));
    }
    std::vector<std::string> overflow(nd_, "CPU");
    Layout layout(nd_);
    std::vector<int64_t> mem = memory(layout, overflow);
    fill_back_to_front(layout, overflow, mem);
    if (moe() && surplus > 0) fill_front_to_back(layout, overflow, mem);
    r_.settings = with_layout(layout, overflow);
    r_.split_set = nd_ > 1;
    for (size_t id = 0; id < nd_; ++id)
      if (mem[id] > free() - target()) r_.success = false;
  }

 private:
  void log(std::string text) const { ctx_.log(std::move(text)); }
  [[nodiscard]] bool before(uint32_t build) const { return in_.build != 0 && in_.build < build; }
  [[nodiscard]] int64_t free() const { return static_cast<int64_t>(in_.free_bytes); }
  [[nodiscard]] int64_t target() const { return static_cast<int64_t>(in_.target_bytes); }
  [[nodiscard]] bool moe() const { return m_.moe.n_expert > 0; }
  // Every layer -ngl counts: the output layer is one from b7475 (#18148).
  [[nodiscard]] uint32_t all_layers() const { return m_.n_layer + (before(7475) ? 0 : 1); }

  // The settings of `layout` (llama.cpp's set_ngl_tensor_split_tbo): -ngl their sum, -ts each
  // device's count, and an override for each partial layer — the first of a device keeps its
  // part and overflows to `overflow[id]`, the others keep their dense weights, experts on the
  // host.
  LlamaCppSettings with_layout(const Layout& layout,
                               const std::vector<std::string>& overflow) const {
    LlamaCppSettings t = r_.settings;
    uint32_t ngl = 0;
    for (const auto& d : layout)
      ngl += d.n_layer;
    t.n_gpu_layers = static_cast<int32_t>(ngl);
    if (nd_ > 1) {
      t.tensor_split.clear();
      for (const auto& d : layout)
        t.tensor_split.push_back(d.n_layer);
    }
    uint32_t il0 = all_layers() - std::min(ngl, all_layers());
    for (size_t id = 0; id < layout.size(); ++id) {
      il0 += layout[id].n_full();
      for (uint32_t il = il0; il < il0 + layout[id].n_part; ++il) {
        const bool first = il == il0;
        t.tensor_overrides.push_back(
            {leaving_pattern(il, first ? layout[id].kept : LayerPart::dense, in_.build),
             first ? overflow[id] : std::string("CPU")});
      }
      il0 += layout[id].n_part;
    }
    return t;
  }

  // What each device needs under `layout`; INT64_MAX where it cannot be planned.
  std::vector<int64_t> memory(const Layout& layout,
                              const std::vector<std::string>& overflow) const {
    const auto d = ctx_.measure(with_layout(layout, overflow));
    std::vector<int64_t> out(nd_, INT64_MAX);
    if (!d || d->used_bytes.size() != nd_) return out;
    for (size_t id = 0; id < nd_; ++id)
      out[id] = static_cast<int64_t>(d->used_bytes[id]);
    return out;
  }

  void device_line(size_t id, const DeviceLayers& d, int64_t mem, bool with_parts) {
    log(with_parts
            ? fmt::format("  - {}: {:2} layers ({:2} overflowing), {:6} MiB used, {:6} "
                          "MiB free",
                          ctx_.gpu_names[id], d.n_layer, d.n_part, fit_mib(mem),
                          fit_mib(free() - mem))
            : fmt::format("  - {}: {:2} layers, {:6} MiB used, {:6} MiB free", ctx_.gpu_names[id],
                          d.n_layer, fit_mib(mem), fit_mib(free() - mem)));
  }

  // Step 4: each device from the last, as many layers as fit (a MoE model's dense-only).
  void fill_back_to_front(Layout& layout, const std::vector<std::string>& overflow,
                          std::vector<int64_t>& mem) {
    log(moe() ? "filling dense-only layers back-to-front:" : "filling dense layers back-to-front:");
    const int64_t limit = free() - target();
    for (size_t id = nd_; id-- > 0;) {
      uint32_t unassigned = all_layers();
      for (size_t jd = id + 1; jd < nd_; ++jd)
        unassigned -= layout[jd].n_layer;
      const bool last = id + 1 == nd_;
      // All the layers left; from b7475 the last device's include the output layer, whole.
      Layout high = layout;
      high[id].n_layer = unassigned;
      if (moe()) high[id].n_part = last && !before(7475) ? unassigned - 1 : unassigned;
      if (unassigned > 0) {
        auto mem_high = memory(high, overflow);
        if (mem_high[id] > limit) {
          uint32_t delta = high[id].n_layer - layout[id].n_layer;
          // From b7560 (#18415) to b7649 the last device's search stopped a layer short.
          if (moe() && last && !before(7560) && before(7650)) delta--;
          while (delta > 1) {
            const uint32_t step = step_size(delta, limit, mem[id], mem_high[id]);
            Layout test = layout;
            test[id].n_layer += step;
            // From b7650 the last device's first layer (its lowest) stays whole.
            if (moe())
              test[id].n_part += last && !before(7650) && test[id].n_part == 0 ? step - 1 : step;
            const auto mem_test = memory(test, overflow);
            if (mem_test[id] <= limit) {
              layout = test;
              mem = mem_test;
            } else {
              high = test;
              mem_high = mem_test;
            }
            delta = high[id].n_layer - layout[id].n_layer;
          }
        } else {
          layout = high;
          // Before b7460 (#18136) the memory kept was the previous candidate's.
          if (!before(7460)) mem = mem_high;
        }
      }
      device_line(id, layout[id], mem[id], false);
    }
  }

  // llama.cpp's false-position step: where the memory, linear between the low and the high
  // candidates, meets the limit; at least 1, at most delta - 1 (its arithmetic: a negative step
  // wraps to the largest).
  static uint32_t step_size(uint32_t delta, int64_t limit, int64_t mem_low, int64_t mem_high) {
    // In long double: a candidate that could not be planned (INT64_MAX) must not overflow.
    const long double span = static_cast<long double>(mem_high) - static_cast<long double>(mem_low);
    long double step = 0;
    if (span != 0) {
      step = static_cast<long double>(delta) *
             (static_cast<long double>(limit) - static_cast<long double>(mem_low)) / span;
    }
    step = std::clamp(step, static_cast<long double>(INT64_MIN) / 2,
                      static_cast<long double>(INT64_MAX) / 2);
    // llama.cpp's int64 quotient into a uint32: modulo 2^32.
    const auto raw = static_cast<uint32_t>(static_cast<uint64_t>(static_cast<int64_t>(step)));
    return std::min(std::max(raw, 1U), delta - 1);
  }

  // `layout` with `n` partial layers of the devices from `*start` on made full layers of device
  // `id`; *start moves past the devices left without partial layers.
  static Layout convert(Layout layout, size_t id, size_t* start, uint32_t n) {
    uint32_t done = 0;
    for (; *start < layout.size(); ++*start) {
      const uint32_t k = std::min(n - done, layout[*start].n_part);
      layout[*start].n_layer -= k;
      layout[*start].n_part -= k;
      layout[id].n_layer += k;
      done += k;
      if (layout[*start].n_part > 0) break;
    }
    return layout;
  }

  // Step 5: from the first device on, dense-only layers made full layers while they fit, then
  // part of one more layer.
  void fill_front_to_back(Layout& layout, std::vector<std::string>& overflow,
                          std::vector<int64_t>& mem) {
    size_t start = nd_;
    for (size_t id = nd_; id-- > 0;) {
      if (layout[id].n_layer == 0) break;
      start = id;
    }
    log("converting dense-only layers to full layers and filling them front-to-back with "
        "overflow to next device/system memory:");
    const int64_t limit = free() - target();
    for (size_t id = 0; id <= start && start < nd_; ++id) {
      // Every dense-only layer a full one here (the last device keeps its output layer).
      Layout high = layout;
      for (size_t jd = start; jd < nd_; ++jd) {
        const uint32_t move =
            jd + 1 < nd_ || before(7475) ? high[jd].n_layer : high[jd].n_layer - 1;
        high[id].n_layer += move;
        high[jd].n_layer -= move;
        high[jd].n_part = 0;
      }
      size_t start_high = nd_ - 1;
      auto mem_high = memory(high, overflow);
      if (mem_high[id] > limit) {
        uint32_t delta = high[id].n_full() - layout[id].n_full();
        while (delta > 1) {
          const uint32_t step = step_size(delta, limit, mem[id], mem_high[id]);
          size_t start_test = start;
          const Layout test = convert(layout, id, &start_test, step);
          const auto mem_test = memory(test, overflow);
          if (mem_test[id] <= limit) {
            layout = test;
            mem = mem_test;
            start = start_test;
          } else {
            high = test;
            mem_high = mem_test;
            start_high = start_test;
          }
          delta = high[id].n_full() - layout[id].n_full();
        }
      } else {
        layout = high;
        mem = mem_high;
        start = start_high;
      }
      keep_part_of_one_more_layer(id, layout, overflow, mem, start);
      device_line(id, layout[id], mem[id], true);
    }
    for (size_t id = start + 1; id < nd_; ++id)
      device_line(id, layout[id], mem[id], true);
  }

  // Part of one more layer on device `id`, overflowing to the next device (the host from the
  // last): its up experts, then also its gate experts, where the device (and the next) stay under
  // their targets; failing the up experts, only its attention.
  void keep_part_of_one_more_layer(size_t id, Layout& layout, std::vector<std::string>& overflow,
                                   std::vector<int64_t>& mem, size_t& start) {
    const bool last = id + 1 == nd_;
    if (start >= nd_ || layout[start].n_layer <= (last ? 1U : 0U) || layout[start].n_part == 0)
      return;
    Layout t = layout;
    size_t start_t = start;
    t[start_t].n_layer--;
    t[start_t].n_part--;
    t[id].n_layer++;
    t[id].n_part++;
    if (t[start_t].n_part == 0) ++start_t;
    std::vector<std::string> overflow_t = overflow;
    if (!last) overflow_t[id] = fmt::format("CUDA{}", id + 1);
    const int64_t limit = free() - target();
    const auto under = [&](const std::vector<int64_t>& m) {
      return m[id] < limit && (last || m[id + 1] < limit);
    };
    const auto accept = [&](const std::vector<int64_t>& m) {
      layout = t;
      overflow = overflow_t;
      mem = m;
      start = start_t;
    };
    t[id].kept = LayerPart::up;
    auto m = memory(t, overflow_t);
    if (under(m)) {
      accept(m);
      t[id].kept = LayerPart::gate;
      m = memory(t, overflow_t);
      if (under(m)) accept(m);
      return;
    }
    t[id].kept = LayerPart::attention;
    m = memory(t, overflow_t);
    if (under(m)) accept(m);
  }

  const model::ModelSpec& m_;
  const LlamaCppFitInput& in_;
  const FitLayersContext& ctx_;
  LlamaCppFitResult& r_;
  size_t nd_ = 0;
};

}  // namespace

void fit_llamacpp_layers(const FitLayersContext& ctx, LlamaCppFitResult& r) {
  LayerFitter(ctx, r).run();
}

}  // namespace kvprof::engines
