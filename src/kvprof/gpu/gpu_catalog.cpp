// Loading and lookup of the embedded GPU catalog.
#include "kvprof/gpu/gpu_catalog.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::embedded {
std::string_view gpus_json();
}

namespace kvprof::gpu {
namespace {

// "NVIDIA H100 80GB HBM3" -> "h10080gbhbm3": case, spaces, dashes, underscores and vendor dropped.
std::string normalize(std::string_view name) {
  std::string s = to_lower(trim(name));
  for (const std::string_view prefix : {"nvidia ", "amd ", "nvidia-", "amd-"}) {
    if (s.starts_with(prefix)) s = s.substr(prefix.size());
  }
  std::string out;
  for (char c : s) {
    if (c != ' ' && c != '-' && c != '_') out.push_back(c);
  }
  return out;
}

std::vector<GpuSpec> load_catalog() {
  const auto doc = nlohmann::json::parse(embedded::gpus_json(), nullptr, false);
  if (doc.is_discarded() || !doc.contains("gpus")) {
    throw Fatal({ErrorKind::internal, "embedded data/gpus.json is malformed"});
  }
  std::vector<GpuSpec> out;
  for (const auto& g : doc.at("gpus")) {
    GpuSpec spec;
    spec.id = g.at("id").get<std::string>();
    spec.name = g.at("name").get<std::string>();
    spec.aliases = g.value("aliases", std::vector<std::string>{});
    spec.vendor = g.value("vendor", "nvidia");
    spec.arch = g.value("arch", "");
    spec.compute_capability = g.value("compute_capability", 0U);
    spec.memory_bytes = g.at("memory_bytes").get<uint64_t>();
    spec.memory_nominal_bytes = g.value("memory_nominal_bytes", spec.memory_bytes);
    spec.bandwidth_gb_s = g.value("bandwidth_gb_s", 0.0);
    spec.tflops_bf16 = g.value("tflops_bf16", 0.0);
    spec.tflops_fp8 = g.value("tflops_fp8", 0.0);
    spec.price_hint = g.value("price_hint", 0.0);
    spec.interconnect = g.value("interconnect", std::string("nvlink"));
    spec.source = g.value("source", "");
    out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace

const std::vector<GpuSpec>& gpu_catalog() {
  static const std::vector<GpuSpec> catalog = load_catalog();
  return catalog;
}

Expected<GpuSpec> find_gpu(std::string_view name) {
  const std::string key = normalize(name);
  if (key.empty()) return fail(ErrorKind::usage, "empty GPU name");
  for (const auto& g : gpu_catalog()) {
    if (normalize(g.id) == key || normalize(g.name) == key) return g;
    for (const auto& a : g.aliases) {
      if (normalize(a) == key) return g;
    }
  }
  std::vector<std::string> names;
  for (const auto& g : gpu_catalog())
    names.push_back(g.id);
  const auto hints = closest_matches(name, names);
  std::string msg = fmt::format("unknown GPU '{}'", name);
  if (!hints.empty()) msg += fmt::format("; did you mean {}?", fmt::join(hints, ", "));
  msg += " (see `kvprof gpus`, or give --gpu-mem SIZE)";
  return fail(ErrorKind::not_found, msg);
}

GpuSpec custom_gpu(uint64_t memory_bytes) {
  GpuSpec g;
  g.id = "custom";
  g.name = fmt::format("custom GPU ({})", format_bytes(memory_bytes));
  g.vendor = "nvidia";
  g.memory_bytes = memory_bytes;
  g.memory_nominal_bytes = memory_bytes;
  return g;
}

bool names_no_gpu(std::string_view name) {
  const std::string lower = to_lower(name);
  return lower == "cpu" || lower == "none";
}

GpuSpec no_gpu() {
  GpuSpec g = custom_gpu(1);
  g.id = "cpu";
  g.name = "none (CPU)";
  return g;
}

}  // namespace kvprof::gpu
