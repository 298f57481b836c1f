// Prometheus HTTP API source (see prometheus_api.hpp).
#include "kvprof/gpu/prometheus_api.hpp"

#include <fmt/format.h>

#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "kvprof/client/http_get.hpp"
#include "kvprof/metrics/prometheus.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::gpu {

namespace {

constexpr size_t k_max_series = 4096;

std::string quote(std::string_view value) {
  std::string out = "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + '"';
}

const char* op_text(LabelMatcher::Op op) {
  switch (op) {
    case LabelMatcher::Op::equal:
      return "=";
    case LabelMatcher::Op::not_equal:
      return "!=";
    case LabelMatcher::Op::regex:
      return "=~";
    case LabelMatcher::Op::not_regex:
      return "!~";
  }
  return "=";
}

Expected<void> add_series(std::vector<RemoteGpuReading>& readings, const nlohmann::json& series) {
  if (!series.is_object() || !series.contains("metric") || !series["metric"].is_object()) {
    return fail(ErrorKind::input, "a series without a \"metric\" object");
  }
  std::map<std::string, std::string> labels;
  for (const auto& [name, value] : series["metric"].items()) {
    if (!value.is_string()) return fail(ErrorKind::input, "a label value is not a string");
    labels[name] = value.get<std::string>();
  }
  const auto& point = series.contains("value") ? series["value"] : nlohmann::json();
  if (!point.is_array() || point.size() != 2 || !point[1].is_string()) {
    return fail(ErrorKind::input, "a series without a [time, \"value\"] pair");
  }
  const auto value = metrics::parse_prometheus_value(point[1].get_ref<const std::string&>());
  if (!value) return fail(ErrorKind::input, "a series value is not a number");
  const auto name = labels.find("__name__");
  if (name == labels.end()) return {};
  add_dcgm_sample(readings, name->second, labels, *value);
  return {};
}

}  // namespace

std::string dcgm_memory_query(const std::vector<LabelMatcher>& selector) {
  std::string query = R"q({__name__=~"DCGM_FI_DEV_FB_(USED|FREE|RESERVED|TOTAL)")q";
  for (const auto& m : selector)
    query += fmt::format(",{}{}{}", m.name, op_text(m.op), quote(m.value));
  return query + "}";
}

Expected<std::vector<RemoteGpuReading>> parse_prometheus_query_answer(std::string_view json_text) {
  const auto doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return fail(ErrorKind::input, "the answer is not a JSON object");
  }
  const auto status = doc.value("status", nlohmann::json()).is_string()
                          ? doc["status"].get<std::string>()
                          : std::string();
  if (status != "success") {
    const auto& error = doc.contains("error") && doc["error"].is_string()
                            ? doc["error"].get_ref<const std::string&>()
                            : status;
    return fail(ErrorKind::input,
                fmt::format("Prometheus answered: {}", error.empty() ? "no status" : error));
  }
  const auto& data = doc.contains("data") ? doc["data"] : nlohmann::json();
  if (!data.is_object() || !data.contains("resultType") || !data["resultType"].is_string() ||
      data["resultType"].get_ref<const std::string&>() != "vector" || !data.contains("result") ||
      !data["result"].is_array()) {
    return fail(ErrorKind::input, "the answer is not an instant vector");
  }
  const auto& result = data["result"];
  if (result.size() > k_max_series) {
    return fail(ErrorKind::input,
                fmt::format("{} series in the answer (more than {}): narrow --gpu-selector",
                            result.size(), k_max_series));
  }
  std::vector<RemoteGpuReading> readings;
  for (const auto& series : result) {
    if (auto ok = add_series(readings, series); !ok) return std::unexpected(ok.error());
  }
  return readings;
}

std::unique_ptr<RemoteSource> make_prometheus_source(const std::string& base_url,
                                                     std::vector<LabelMatcher> selector,
                                                     uint32_t min_refresh_ms) {
  std::string root = base_url;
  while (root.ends_with('/'))
    root.pop_back();
  const std::string url =
      root + "/api/v1/query?query=" + percent_encode(dcgm_memory_query(selector));
  auto getter = std::make_shared<client::HttpGetter>();
  auto fetch = [url, getter]() -> Expected<std::vector<RemoteGpuReading>> {
    client::HttpGetOptions options;
    options.timeout_ms = 3000;
    options.max_body_bytes = 16ULL << 20;
    auto answer = getter->get(url, options);
    if (!answer) return std::unexpected(answer.error());
    // Prometheus answers 400/422/503 with its JSON error body: the parser reports its message.
    auto readings = parse_prometheus_query_answer(answer->body);
    if (!readings && answer->status != 200) {
      return fail(ErrorKind::network,
                  fmt::format("answered HTTP {} ({})", answer->status, readings.error().message));
    }
    return readings;
  };
  return std::make_unique<RemoteSource>(fmt::format("Prometheus {}", root), std::move(fetch),
                                        min_refresh_ms);
}

}  // namespace kvprof::gpu
