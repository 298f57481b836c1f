// `kvprof estimate --plot`: a plan drawn as two figures — per-GPU memory vs concurrency at the
// plan's context, and vs context length at its concurrency — each with the GPU's usable memory,
// the KV capacity and the labelled point where the cache runs out (estimate/inverse.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "kvprof/estimate/result.hpp"
#include "kvprof/estimate/settings.hpp"
#include "kvprof/report/html/figures.hpp"
#include "kvprof/report/html/image.hpp"
#include "kvprof/util/error.hpp"

namespace kvprof::report::html {

// The plan's point: the first --context (else max_model_len) and the first --concurrency (else 1).
struct PlanPoint {
  uint64_t context_tokens = 0;
  uint32_t concurrency = 1;
};
PlanPoint plan_point(const estimate::Estimate& est, const estimate::Workload& workload);

// PNG or SVG from `path`'s extension (case-insensitive); usage error naming both otherwise.
Expected<ImageFormat> plot_format_of(const std::filesystem::path& path);

// Memory vs concurrency at `point.context_tokens` (fig 0) and vs context length at
// `point.concurrency` (fig 1), per GPU, in GiB or MiB.
std::vector<Figure> plan_figures(const estimate::Estimate& est, PlanPoint point);

// Draws plan_figures() one above the other into `path`; io error when it cannot be written.
Expected<void> write_plan_figure(const estimate::Estimate& est, PlanPoint point,
                                 const std::filesystem::path& path, ImageFormat format);

}  // namespace kvprof::report::html
