// DCGM exporter source (see dcgm.hpp).
#include "kvprof/gpu/dcgm.hpp"

#include <fmt/format.h>

#include <map>
#include <memory>

#include "kvprof/client/http_get.hpp"
#include "kvprof/metrics/prometheus.hpp"

namespace kvprof::gpu {

Expected<std::vector<RemoteGpuReading>> parse_dcgm_metrics(
    std::string_view text, const std::vector<LabelMatcher>& selector) {
  metrics::ParseOptions options;
  options.strict = false;
  options.max_samples = 100'000;
  options.max_labels_per_sample = 64;
  auto exposition = metrics::parse_prometheus_text(text, options);
  if (!exposition) return std::unexpected(exposition.error());
  std::vector<RemoteGpuReading> readings;
  std::map<std::string, std::string> labels;
  for (const auto& family : exposition->families) {
    if (!family.name.starts_with("DCGM_FI_DEV_FB_")) continue;
    for (const auto& sample : family.samples) {
      labels.clear();
      for (const auto& label : sample.labels)
        labels[label.name] = label.value;
      if (!labels_match(labels, selector)) continue;
      add_dcgm_sample(readings, sample.name, labels, sample.value);
    }
  }
  return readings;
}

std::unique_ptr<RemoteSource> make_dcgm_source(const std::string& url,
                                               std::vector<LabelMatcher> selector,
                                               uint32_t min_refresh_ms) {
  auto getter = std::make_shared<client::HttpGetter>();
  auto fetch = [url, selector = std::move(selector),
                getter]() -> Expected<std::vector<RemoteGpuReading>> {
    client::HttpGetOptions options;
    options.timeout_ms = 3000;
    options.max_body_bytes = 16ULL << 20;
    auto answer = getter->get(url, options);
    if (!answer) return std::unexpected(answer.error());
    if (answer->status != 200) {
      return fail(ErrorKind::network, fmt::format("answered HTTP {}", answer->status));
    }
    return parse_dcgm_metrics(answer->body, selector);
  };
  return std::make_unique<RemoteSource>(fmt::format("DCGM exporter {}", url), std::move(fetch),
                                        min_refresh_ms);
}

}  // namespace kvprof::gpu
