// A plan's memory figures (see plan_figure.hpp). Both x axes double at each category (1, 2, 4,
// ... requests; 256, 512, ... tokens), so a point between categories sits at log2 of its value.
#include "kvprof/report/html/plan_figure.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>

#include "kvprof/estimate/inverse.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::report::html {
namespace {

constexpr size_t k_max_categories = 24;
constexpr int k_steps_per_category = 8;  // curve samples between two categories

// Values first, 2 first, 4 first, ... up to at least `top` (at most k_max_categories of them).
struct DoublingAxis {
  uint64_t first = 1;
  size_t count = 1;
  [[nodiscard]] double index_of(double v) const {
    return std::log2(std::max(v, 1.0) / static_cast<double>(first));
  }
  [[nodiscard]] double value_at(double index) const {
    return static_cast<double>(first) * std::exp2(index);
  }
};

DoublingAxis doubling_axis(uint64_t first, uint64_t top) {
  DoublingAxis a{first, 1};
  for (uint64_t v = first; v < top && a.count < k_max_categories; v *= 2)
    ++a.count;
  return a;
}

// 512, 1K, 128K, 1M: token counts as people write context lengths (K = 1024).
std::string tokens_label(uint64_t tokens) {
  if (tokens >= (1ULL << 20) && tokens % (1ULL << 20) == 0) return fmt::format("{}M", tokens >> 20);
  if (tokens >= 1024 && tokens % 1024 == 0) return fmt::format("{}K", tokens >> 10);
  return std::to_string(tokens);
}

// True where the engine allocates a pool of KV blocks at start (past it requests queue).
bool paged_pool(const estimate::Estimate& est) {
  return engines::engine_row(est.settings.engine).kv_allocation ==
         engines::KvAllocation::paged_pool;
}

// Everything on the GPU but the KV cache: weights, activations, CUDA graphs, workspaces, context.
uint64_t fixed_bytes(const estimate::Estimate& est) {
  return est.per_gpu.total_bytes - std::min(est.per_gpu.total_bytes, est.per_gpu.kv_cache_bytes);
}

std::string plan_subtitle(const estimate::Estimate& est) {
  const auto& s = est.settings;
  std::string what;
  if (est.verdict == estimate::Verdict::does_not_start) {
    what = "does not start (" + est.start_failure + ")";
  } else if (paged_pool(est)) {
    what = "KV pool allocated at start: past its line requests queue, memory stays the same";
  } else if (engines::engine_row(s.engine).kv_allocation == engines::KvAllocation::cells) {
    what = "KV cells (-c) allocated at start: past their line a request does not fit";
  } else {
    what = "KV cache grows with the workload: past the usable line memory runs out";
  }
  return fmt::format("{} | {} | {} x {} (TP {}, PP {}) | {}", est.model_id,
                     engines::engine_name(s.engine), est.gpus_total, est.gpu.id,
                     s.tensor_parallel_size, s.pipeline_parallel_size, what);
}

// The parts every figure of the plan shares: subtitle, unit, flat lines, capacity lines.
Figure plan_base(const estimate::Estimate& est, const DoublingAxis& axis, MemoryUnit unit) {
  Figure f;
  f.subtitle = plan_subtitle(est);
  f.y_label = fmt::format("per-GPU memory ({})", unit.name);
  f.y_unit = unit.name;
  const double last = static_cast<double>(axis.count - 1);
  const auto flat = [&](std::string name, int color, uint64_t bytes) {
    f.series.push_back(
        {std::move(name),
         Nature::estimated,
         color,
         false,
         false,
         {0, last},
         {static_cast<double>(bytes) / unit.bytes, static_cast<double>(bytes) / unit.bytes}});
  };
  flat("weights", 7, est.per_gpu.weights_bytes + est.per_gpu.draft_bytes);
  flat("weights + fixed costs", 1, fixed_bytes(est));
  FigureSeries usable{"usable GPU memory", Nature::estimated, -1, true, false, {}, {}};
  usable.y = {static_cast<double>(est.gpu.memory_bytes) / unit.bytes};
  f.hlines.push_back(std::move(usable));
  if (est.kv_capacity_bytes > 0) {
    FigureSeries pool{
        paged_pool(est) ? "fixed + KV pool (allocated at start)" : "fixed + KV capacity",
        Nature::estimated,
        0,
        true,
        false,
        {},
        {}};
    pool.y = {static_cast<double>(fixed_bytes(est) + est.kv_capacity_bytes) / unit.bytes};
    f.hlines.push_back(std::move(pool));
  }
  return f;
}

// The "+ KV cache needed" curve over the axis, `bytes_at(value)` per GPU, stopped once it is
// well past the highest capacity line so it does not squash the figure.
FigureSeries kv_curve(const estimate::Estimate& est, const DoublingAxis& axis, MemoryUnit unit,
                      const std::function<uint64_t(uint64_t)>& bytes_at) {
  FigureSeries s{paged_pool(est) ? "weights + fixed + KV needed by the workload"
                                 : "weights + fixed + KV cache",
                 Nature::estimated,
                 0,
                 false,
                 false,
                 {},
                 {}};
  const double ceiling = 1.4 * static_cast<double>(std::max(
                                   est.gpu.memory_bytes, fixed_bytes(est) + est.kv_capacity_bytes));
  uint64_t previous = 0;
  const int steps = static_cast<int>(axis.count - 1) * k_steps_per_category;
  for (int i = 0; i <= steps; ++i) {
    const auto v = static_cast<uint64_t>(
        std::llround(axis.value_at(static_cast<double>(i) / k_steps_per_category)));
    if (v == previous) continue;
    previous = v;
    const double bytes = static_cast<double>(bytes_at(v));
    s.x.push_back(axis.index_of(static_cast<double>(v)));
    s.y.push_back(bytes / unit.bytes);
    if (bytes > ceiling) break;
  }
  return s;
}

MemoryUnit unit_of(const estimate::Estimate& est) {
  return memory_unit(static_cast<double>(
      std::max(est.gpu.memory_bytes, fixed_bytes(est) + est.kv_capacity_bytes)));
}

uint64_t request_bytes(const estimate::Estimate& est, uint64_t context_tokens) {
  return est.request_kv_bytes ? est.request_kv_bytes(context_tokens) : 0;
}

Figure concurrency_figure(const estimate::Estimate& est, uint64_t context_tokens) {
  const uint64_t max_concurrency = estimate::max_concurrency_at(est, context_tokens);
  const auto axis = doubling_axis(1, std::max<uint64_t>(8, 2 * max_concurrency));
  const auto unit = unit_of(est);
  Figure f = plan_base(est, axis, unit);
  f.id = "plan_mem_vs_concurrency";
  f.title =
      fmt::format("Per-GPU memory vs concurrency, {}-token requests", tokens_label(context_tokens));
  f.x_label = "concurrent requests";
  for (size_t i = 0; i < axis.count; ++i)
    f.categories.push_back(std::to_string(axis.first << i));
  const uint64_t per_request = request_bytes(est, context_tokens);
  const uint64_t fixed = fixed_bytes(est);
  f.series.push_back(
      kv_curve(est, axis, unit, [&](uint64_t n) { return fixed + n * per_request; }));
  FigureMark mark;
  if (max_concurrency == 0) {
    mark.label = fmt::format("no request of {} tokens fits", context_tokens);
    mark.y = static_cast<double>(fixed + per_request) / unit.bytes;
  } else {
    mark.label = fmt::format("max concurrency {} at {} tokens", max_concurrency, context_tokens);
    if (est.max_parallel_requests > 0 && max_concurrency == est.max_parallel_requests)
      mark.label += " (slot limit)";
    mark.x = axis.index_of(static_cast<double>(max_concurrency));
    mark.y = static_cast<double>(fixed + max_concurrency * per_request) / unit.bytes;
  }
  f.marks.push_back(std::move(mark));
  return f;
}

Figure context_figure(const estimate::Estimate& est, uint64_t context_tokens,
                      uint32_t concurrency) {
  // The same search and limit as estimate --json's max_context_at_concurrency.
  const uint64_t limit = std::max<uint64_t>(est.engine_report.max_model_len, context_tokens);
  const uint64_t max_context = estimate::max_context_at(est, concurrency, limit);
  const uint64_t top = max_context < limit ? std::max(limit, 2 * max_context) : 2 * limit;
  const uint64_t first =
      std::clamp<uint64_t>(std::bit_floor(std::max<uint64_t>(max_context, 1)) / 4, 16, 256);
  const auto axis = doubling_axis(first, top);
  const auto unit = unit_of(est);
  Figure f = plan_base(est, axis, unit);
  f.id = "plan_mem_vs_context";
  f.title = fmt::format("Per-GPU memory vs context length, {} concurrent request{}", concurrency,
                        concurrency == 1 ? "" : "s");
  f.x_label = "tokens per request (prompt + output, K = 1024)";
  for (size_t i = 0; i < axis.count; ++i)
    f.categories.push_back(tokens_label(axis.first << i));
  const uint64_t fixed = fixed_bytes(est);
  f.series.push_back(kv_curve(est, axis, unit, [&](uint64_t ctx) {
    return fixed + concurrency * request_bytes(est, ctx);
  }));
  FigureMark mark;
  if (max_context == 0) {
    mark.label = fmt::format("not one token each fits at concurrency {}", concurrency);
    mark.y = static_cast<double>(fixed) / unit.bytes;
  } else {
    mark.label =
        max_context < limit
            ? fmt::format("max context {} tokens at concurrency {}", max_context, concurrency)
            : fmt::format("max_model_len {} fits at concurrency {}", max_context, concurrency);
    mark.x = axis.index_of(static_cast<double>(max_context));
    mark.y =
        static_cast<double>(fixed + concurrency * request_bytes(est, max_context)) / unit.bytes;
  }
  f.marks.push_back(std::move(mark));
  return f;
}

}  // namespace

PlanPoint plan_point(const estimate::Estimate& est, const estimate::Workload& workload) {
  PlanPoint p;
  p.context_tokens = workload.context_tokens.empty()
                         ? std::max<uint64_t>(1, est.engine_report.max_model_len)
                         : workload.context_tokens.front();
  if (!workload.concurrency.empty()) p.concurrency = workload.concurrency.front();
  return p;
}

Expected<ImageFormat> plot_format_of(const std::filesystem::path& path) {
  const std::string ext = to_lower(path.extension().string());
  if (ext == ".png") return ImageFormat::png;
  if (ext == ".svg") return ImageFormat::svg;
  return fail(ErrorKind::usage,
              fmt::format("--plot: '{}' must end in .png or .svg", path.string()));
}

std::vector<Figure> plan_figures(const estimate::Estimate& est, PlanPoint point) {
  return {concurrency_figure(est, point.context_tokens),
          context_figure(est, point.context_tokens, point.concurrency)};
}

Expected<void> write_plan_figure(const estimate::Estimate& est, PlanPoint point,
                                 const std::filesystem::path& path, ImageFormat format) {
  const auto figures = plan_figures(est, point);
  return write_figures(figures, path, format);
}

}  // namespace kvprof::report::html
