// GPU memory source selection (see source_select.hpp).
#include "kvprof/gpu/source_select.hpp"

#include <fmt/format.h>

#include "kvprof/gpu/dcgm.hpp"
#include "kvprof/gpu/nvml.hpp"
#include "kvprof/gpu/prometheus_api.hpp"
#include "kvprof/gpu/remote_source.hpp"
#include "kvprof/util/net.hpp"

namespace kvprof::gpu {

namespace {

constexpr const char* k_forms = "auto, nvml, none, dcgm=URL or prometheus=URL";

GpuSourceChoice nvml_or_note(bool required) {
  GpuSourceChoice choice;
  auto nvml = NvmlSource::open();
  if (nvml) {
    choice.source = std::move(*nvml);
    choice.name = "nvml";
  } else {
    choice.note = nvml.error().message;
    choice.warn = required;
  }
  return choice;
}

}  // namespace

Expected<GpuSourceSpec> parse_gpu_source(std::string_view text) {
  GpuSourceSpec spec;
  if (text == "auto" || text.empty()) return spec;
  if (text == "nvml") {
    spec.kind = GpuSourceKind::nvml;
    return spec;
  }
  if (text == "none") {
    spec.kind = GpuSourceKind::none;
    return spec;
  }
  const size_t eq = text.find('=');
  const std::string_view kind = text.substr(0, eq);
  if (eq == std::string_view::npos || (kind != "dcgm" && kind != "prometheus")) {
    return fail(ErrorKind::usage,
                fmt::format("--gpu-source '{}': expected one of {}", text, k_forms));
  }
  spec.kind = kind == "dcgm" ? GpuSourceKind::dcgm : GpuSourceKind::prometheus;
  spec.url = std::string(text.substr(eq + 1));
  if (!url_host(spec.url)) {
    return fail(
        ErrorKind::usage,
        fmt::format("--gpu-source {}=URL: '{}' is not an http:// or https:// URL", kind, spec.url));
  }
  return spec;
}

Expected<GpuSourceChoice> open_gpu_source(const GpuSourceSpec& spec, std::string_view selector,
                                          std::string_view endpoint, uint32_t min_refresh_ms) {
  auto matchers = parse_label_selector(selector);
  if (!matchers) return std::unexpected(matchers.error());
  switch (spec.kind) {
    case GpuSourceKind::none: {
      GpuSourceChoice choice;
      choice.note = "--gpu-source none";
      return choice;
    }
    case GpuSourceKind::nvml:
      return nvml_or_note(/*required=*/true);
    case GpuSourceKind::automatic: {
      const auto host = url_host(endpoint);
      if (endpoint.empty() || (host && is_local_host(*host))) return nvml_or_note(false);
      GpuSourceChoice choice;
      choice.note = fmt::format(
          "the server at {} is not on this machine, so its GPU memory is not sampled (this "
          "machine's GPUs would be attributed to it); use --gpu-source dcgm=URL or "
          "prometheus=URL for the node it runs on, or --gpu-source nvml if it does run here",
          host.value_or(std::string(endpoint)));
      choice.warn = true;
      return choice;
    }
    case GpuSourceKind::dcgm:
    case GpuSourceKind::prometheus: {
      GpuSourceChoice choice;
      const bool dcgm = spec.kind == GpuSourceKind::dcgm;
      auto source = dcgm ? make_dcgm_source(spec.url, std::move(*matchers), min_refresh_ms)
                         : make_prometheus_source(spec.url, std::move(*matchers), min_refresh_ms);
      auto count = source->device_count();
      if (!count) return std::unexpected(count.error());
      choice.source = std::move(source);
      choice.name = dcgm ? "dcgm" : "prometheus";
      choice.remote = true;
      return choice;
    }
  }
  return GpuSourceChoice{};
}

}  // namespace kvprof::gpu
