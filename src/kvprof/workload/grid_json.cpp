// GridOptions <-> JSON with every value bounded.
#include "kvprof/workload/grid_json.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace kvprof::workload {

using nlohmann::json;

namespace {

constexpr size_t k_max_axis_values = 1000;

Expected<std::vector<uint32_t>> uint_list(const json& doc, const char* key, uint32_t max_value) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_array() || it->empty() || it->size() > k_max_axis_values) {
    return fail(ErrorKind::input, fmt::format("generator: '{}' must be a list of 1 to {} integers",
                                              key, k_max_axis_values));
  }
  std::vector<uint32_t> out;
  for (const json& v : *it) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() == 0 || v.get<uint64_t>() > max_value) {
      return fail(ErrorKind::input,
                  fmt::format("generator: '{}' holds a value outside 1..{}", key, max_value));
    }
    out.push_back(static_cast<uint32_t>(v.get<uint64_t>()));
  }
  return out;
}

Expected<uint64_t> uint_field(const json& doc, const char* key, uint64_t max_value) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_number_unsigned() || it->get<uint64_t>() > max_value) {
    return fail(ErrorKind::input,
                fmt::format("generator: '{}' must be an integer in 0..{}", key, max_value));
  }
  return it->get<uint64_t>();
}

Expected<double> number_field(const json& doc, const char* key, double max_value) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_number() || !std::isfinite(it->get<double>()) ||
      it->get<double>() < 0 || it->get<double>() > max_value) {
    return fail(ErrorKind::input,
                fmt::format("generator: '{}' must be a number in 0..{}", key, max_value));
  }
  return it->get<double>();
}

Expected<std::string> string_field(const json& doc, const char* key) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_string() || it->get_ref<const std::string&>().size() > 64) {
    return fail(ErrorKind::input, fmt::format("generator: '{}' must be a short string", key));
  }
  return it->get<std::string>();
}

}  // namespace

json grid_json(const GridOptions& o) {
  json modes = json::array();
  for (const PrefixMode m : o.prefix_modes)
    modes.push_back(prefix_mode_name(m));
  return {{"version", k_generator_version},
          {"seed", o.seed},
          {"input_lens", o.input_lens},
          {"output_lens", o.output_lens},
          {"concurrencies", o.concurrencies},
          {"prefix_modes", modes},
          {"n_per_condition", o.n_per_condition},
          {"count_mode", count_mode_name(o.count_mode)},
          {"request_rate", o.request_rate},
          {"prompt_format", prompt_format_name(o.prompt_format)},
          {"prefix_fraction", o.prefix_fraction},
          {"token_id_min", o.token_id_min},
          {"token_id_max", o.token_id_max}};
}

#define KVPROF_GRID_TRY(target, expr)                       \
  do {                                                      \
    auto _r = (expr);                                       \
    if (!_r) return std::unexpected(std::move(_r.error())); \
    target = *std::move(_r);                                \
  } while (0)

Expected<GridOptions> parse_grid_json(const json& doc) {
  if (!doc.is_object()) return fail(ErrorKind::input, "generator: not a JSON object");
  uint64_t version = 0;
  KVPROF_GRID_TRY(version, uint_field(doc, "version", 1000));
  if (version != k_generator_version) {
    return fail(ErrorKind::input,
                fmt::format("generator version {} is not one this kvprof knows (it writes {})",
                            version, k_generator_version));
  }
  GridOptions o;
  KVPROF_GRID_TRY(o.seed, uint_field(doc, "seed", std::numeric_limits<uint64_t>::max()));
  KVPROF_GRID_TRY(o.input_lens, uint_list(doc, "input_lens", k_max_input_len));
  KVPROF_GRID_TRY(o.output_lens, uint_list(doc, "output_lens", k_max_output_len));
  KVPROF_GRID_TRY(o.concurrencies, uint_list(doc, "concurrencies", k_max_concurrency));
  const auto modes = doc.find("prefix_modes");
  if (modes == doc.end() || !modes->is_array() || modes->empty() || modes->size() > 2) {
    return fail(ErrorKind::input, "generator: 'prefix_modes' must be a list of 1 or 2 names");
  }
  o.prefix_modes.clear();
  for (const json& m : *modes) {
    if (!m.is_string()) return fail(ErrorKind::input, "generator: a prefix mode must be a string");
    auto mode = parse_prefix_mode(m.get<std::string>());
    if (!mode) return std::unexpected(mode.error().with_context("generator"));
    o.prefix_modes.push_back(*mode);
  }
  uint64_t v = 0;
  KVPROF_GRID_TRY(v, uint_field(doc, "n_per_condition", k_max_requests));
  o.n_per_condition = static_cast<uint32_t>(v);
  std::string s;
  KVPROF_GRID_TRY(s, string_field(doc, "count_mode"));
  KVPROF_GRID_TRY(o.count_mode, parse_count_mode(s));
  KVPROF_GRID_TRY(o.request_rate, number_field(doc, "request_rate", 1e9));
  KVPROF_GRID_TRY(s, string_field(doc, "prompt_format"));
  KVPROF_GRID_TRY(o.prompt_format, parse_prompt_format(s));
  KVPROF_GRID_TRY(o.prefix_fraction, number_field(doc, "prefix_fraction", 1.0));
  KVPROF_GRID_TRY(v, uint_field(doc, "token_id_min", std::numeric_limits<uint32_t>::max()));
  o.token_id_min = static_cast<uint32_t>(v);
  KVPROF_GRID_TRY(v, uint_field(doc, "token_id_max", std::numeric_limits<uint32_t>::max()));
  o.token_id_max = static_cast<uint32_t>(v);
  if (auto ok = validate(o); !ok) {
    return std::unexpected(Error{ErrorKind::input, "generator: " + ok.error().message});
  }
  return o;
}

}  // namespace kvprof::workload
