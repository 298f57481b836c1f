// Prometheus HTTP API source (see prometheus_api.hpp).
#include "kvprof/gpu/prometheus_api.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "kvprof/client/http_get.hpp"
#include "kvprof/metrics/prometheus.hpp"
#include "kvprof/util/strings.hpp"

namespace kvprof::gpu {

namespace {

constexpr size_t k_max_series = 4096;
constexpr size_t k_max_range_points = 1'000'000;
constexpr int64_t k_max_steps_per_query = 10'000;  // Prometheus refuses more than 11,000
constexpr double k_max_timestamp_s = 1e11;         // year 5138: anything later is garbage

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

// The labels of a series' "metric" object.
Expected<std::map<std::string, std::string>> series_labels(const nlohmann::json& series) {
  if (!series.is_object() || !series.contains("metric") || !series["metric"].is_object()) {
    return fail(ErrorKind::input, "a series without a \"metric\" object");
  }
  std::map<std::string, std::string> labels;
  for (const auto& [name, value] : series["metric"].items()) {
    if (!value.is_string()) return fail(ErrorKind::input, "a label value is not a string");
    labels[name] = value.get<std::string>();
  }
  return labels;
}

// One [time, "value"] pair: its time in Unix ms and its value.
Expected<std::pair<int64_t, double>> parse_point(const nlohmann::json& point) {
  if (!point.is_array() || point.size() != 2 || !point[0].is_number() || !point[1].is_string()) {
    return fail(ErrorKind::input, "a series without a [time, \"value\"] pair");
  }
  const double t_s = point[0].get<double>();
  if (!std::isfinite(t_s) || t_s < 0 || t_s > k_max_timestamp_s) {
    return fail(ErrorKind::input, "a sample time out of range");
  }
  const auto value = metrics::parse_prometheus_value(point[1].get_ref<const std::string&>());
  if (!value) return fail(ErrorKind::input, "a series value is not a number");
  return std::pair{static_cast<int64_t>(std::llround(t_s * 1000.0)), *value};
}

Expected<void> add_series(std::vector<RemoteGpuReading>& readings, const nlohmann::json& series) {
  auto labels = series_labels(series);
  if (!labels) return std::unexpected(labels.error());
  auto point = parse_point(series.contains("value") ? series["value"] : nlohmann::json());
  if (!point) return std::unexpected(point.error());
  const auto name = labels->find("__name__");
  if (name == labels->end()) return {};
  add_dcgm_sample(readings, name->second, *labels, point->second);
  return {};
}

// The "data" object of a successful answer whose resultType is `type`.
Expected<const nlohmann::json*> answer_result(const nlohmann::json& doc, std::string_view type) {
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
  const auto not_type = [&] {
    return fail(ErrorKind::input, type == "vector" ? "the answer is not an instant vector"
                                                   : "the answer is not a range matrix");
  };
  if (!doc.contains("data")) return not_type();
  const nlohmann::json& data = doc["data"];  // a reference into `doc`: the result points into it
  if (!data.is_object() || !data.contains("resultType") || !data["resultType"].is_string() ||
      data["resultType"].get_ref<const std::string&>() != type || !data.contains("result") ||
      !data["result"].is_array()) {
    return not_type();
  }
  const auto& result = data["result"];
  if (result.size() > k_max_series) {
    return fail(ErrorKind::input,
                fmt::format("{} series in the answer (more than {}): narrow --gpu-selector",
                            result.size(), k_max_series));
  }
  return &result;
}

std::string query_root(const std::string& base_url) {
  std::string root = base_url;
  while (root.ends_with('/'))
    root.pop_back();
  return root;
}

// GETs `url` and parses its answer with `parse`; an HTTP error carries Prometheus's message.
template <typename Parse>
auto get_answer(client::HttpGetter& getter, const std::string& url, uint32_t timeout_ms,
                Parse parse) -> decltype(parse(std::string_view())) {
  client::HttpGetOptions options;
  options.timeout_ms = timeout_ms;
  options.max_body_bytes = 64ULL << 20;
  auto answer = getter.get(url, options);
  if (!answer) return std::unexpected(answer.error());
  // Prometheus answers 400/422/503 with its JSON error body: the parser reports its message.
  auto parsed = parse(answer->body);
  if (!parsed && answer->status != 200) {
    return fail(ErrorKind::network,
                fmt::format("answered HTTP {} ({})", answer->status, parsed.error().message));
  }
  return parsed;
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
  auto result = answer_result(doc, "vector");
  if (!result) return std::unexpected(result.error());
  std::vector<RemoteGpuReading> readings;
  for (const auto& series : **result) {
    if (auto ok = add_series(readings, series); !ok) return std::unexpected(ok.error());
  }
  return readings;
}

Expected<std::vector<TimedRemoteReadings>> parse_prometheus_range_answer(
    std::string_view json_text) {
  const auto doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  auto result = answer_result(doc, "matrix");
  if (!result) return std::unexpected(result.error());
  std::map<int64_t, std::vector<RemoteGpuReading>> by_time;
  size_t points = 0;
  for (const auto& series : **result) {
    auto labels = series_labels(series);
    if (!labels) return std::unexpected(labels.error());
    if (!series.contains("values") || !series["values"].is_array()) {
      return fail(ErrorKind::input, "a range series without \"values\"");
    }
    points += series["values"].size();
    if (points > k_max_range_points) {
      return fail(ErrorKind::input,
                  fmt::format("more than {} points in the answer", k_max_range_points));
    }
    const auto name = labels->find("__name__");
    for (const auto& value : series["values"]) {
      auto point = parse_point(value);
      if (!point) return std::unexpected(point.error());
      if (name != labels->end()) {
        add_dcgm_sample(by_time[point->first], name->second, *labels, point->second);
      }
    }
  }
  std::vector<TimedRemoteReadings> out;
  out.reserve(by_time.size());
  for (auto& [t_ms, readings] : by_time)
    out.push_back({t_ms, std::move(readings)});
  return out;
}

std::string prometheus_range_target(const std::vector<LabelMatcher>& selector, int64_t from_wall_ms,
                                    int64_t to_wall_ms, uint32_t step_ms) {
  return fmt::format("/api/v1/query_range?query={}&start={:.3f}&end={:.3f}&step={:.3f}",
                     percent_encode(dcgm_memory_query(selector)),
                     static_cast<double>(from_wall_ms) / 1000.0,
                     static_cast<double>(to_wall_ms) / 1000.0,
                     static_cast<double>(std::max<uint32_t>(step_ms, 1)) / 1000.0);
}

std::unique_ptr<RemoteSource> make_prometheus_source(const std::string& base_url,
                                                     std::vector<LabelMatcher> selector,
                                                     uint32_t min_refresh_ms) {
  const std::string root = query_root(base_url);
  const std::string url =
      root + "/api/v1/query?query=" + percent_encode(dcgm_memory_query(selector));
  auto getter = std::make_shared<client::HttpGetter>();
  auto fetch = [url, getter]() -> Expected<std::vector<RemoteGpuReading>> {
    return get_answer(*getter, url, 3000, parse_prometheus_query_answer);
  };
  // The history on a connection of its own (it may be read while samples are taken), one request
  // per 10,000 steps.
  auto range_fetch = [root, selector, getter = std::make_shared<client::HttpGetter>()](
                         int64_t from_wall_ms, int64_t to_wall_ms,
                         uint32_t step_ms) -> Expected<std::vector<TimedRemoteReadings>> {
    const int64_t step = std::max<uint32_t>(step_ms, 1);
    std::vector<TimedRemoteReadings> out;
    for (int64_t from = from_wall_ms; from <= to_wall_ms;) {
      const int64_t to = std::min(to_wall_ms, from + step * (k_max_steps_per_query - 1));
      auto part = get_answer(*getter, root + prometheus_range_target(selector, from, to, step_ms),
                             10'000, parse_prometheus_range_answer);
      if (!part) return std::unexpected(part.error().with_context("query_range"));
      for (auto& instant : *part) {
        if (out.empty() || instant.t_wall_ms > out.back().t_wall_ms) {
          out.push_back(std::move(instant));
        }
      }
      from = to + step;
    }
    return out;
  };
  return std::make_unique<RemoteSource>(fmt::format("Prometheus {}", root), std::move(fetch),
                                        min_refresh_ms, std::move(range_fetch),
                                        "Prometheus query_range");
}

}  // namespace kvprof::gpu
