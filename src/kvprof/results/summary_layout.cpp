// The shared layout of run summaries (see summary_layout.hpp).
#include "kvprof/results/summary_layout.hpp"

#include "kvprof/util/json_text.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::results {

using nlohmann::json;

namespace {

json gib_json(const std::optional<int64_t>& bytes) {
  return bytes ? json(static_cast<double>(*bytes) / static_cast<double>(k_gib)) : json(nullptr);
}

json part_json(const PartFigures& p) {
  return {{"bytes", opt_json(p.bytes)}, {"confidence", p.confidence}, {"method", p.method}};
}

}  // namespace

void add_versions(json& summary, int number) {
  summary["schema_version"] = k_layout_version;
  summary["schema_version_number"] = number;
  summary["profiler_version"] = k_layout_version;
  summary["kvprof_version"] = KVPROF_VERSION;
}

json breakdown_json(const BreakdownFigures& b) {
  // JSON values made here, not through an optional copy: GCC's -O2 flow analysis takes such a
  // copy's value for uninitialized and warns (a false alarm the quickstart's build printed).
  const json total_bytes =
      b.total_measured_bytes ? json(static_cast<int64_t>(*b.total_measured_bytes)) : json(nullptr);
  const json total_gib =
      b.total_measured_bytes
          ? json(static_cast<double>(*b.total_measured_bytes) / static_cast<double>(k_gib))
          : json(nullptr);
  // The `_gb` names are aliases of the `_gib` ones: the predecessor's layout, read by its tools.
  json j = {{"memory", b.memory},
            {"gpu", b.gpu ? json(*b.gpu) : json(nullptr)},
            {"total_measured_bytes", total_bytes},
            {"total_measured_gib", total_gib},
            {"total_measured_gb", total_gib}};
  for (const auto& [name, part] :
       {std::pair{"model_weights", &b.weights}, std::pair{"kv_cache", &b.kv_cache},
        std::pair{"activations", &b.activations}, std::pair{"framework_overhead", &b.overhead}}) {
    j[std::string(name) + "_bytes"] = opt_json(part->bytes);
    j[std::string(name) + "_gib"] = gib_json(part->bytes);
    j[std::string(name) + "_gb"] = gib_json(part->bytes);
  }
  j["confidence_levels"] = {{"overall", b.overall_confidence},
                            {"weights", b.weights.confidence},
                            {"kv_cache", b.kv_cache.confidence},
                            {"activations", b.activations.confidence},
                            {"overhead", b.overhead.confidence}};
  j["components"] = {{"weights", part_json(b.weights)},
                     {"kv_cache", part_json(b.kv_cache)},
                     {"activations", part_json(b.activations)},
                     {"overhead", part_json(b.overhead)}};
  return j;
}

json capture_total_json(uint64_t total_bytes) {
  return {{"total_bytes", total_bytes},
          {"total_gib", bytes_to_gib(total_bytes)},
          {"total_gb", bytes_to_gib(total_bytes)}};  // alias of total_gib: the predecessor's name
}

void add_memory_increase(json& measurements, std::optional<uint64_t> baseline_bytes,
                         std::optional<uint64_t> peak_bytes) {
  const bool known = baseline_bytes && peak_bytes;
  const auto increase =
      known ? static_cast<int64_t>(*peak_bytes) - static_cast<int64_t>(*baseline_bytes)
            : int64_t{0};
  const json in_gib =
      known ? json(static_cast<double>(increase) / static_cast<double>(k_gib)) : json(nullptr);
  measurements["memory_increase_bytes"] = known ? json(increase) : json(nullptr);
  measurements["memory_increase_gib"] = in_gib;
  measurements["memory_increase_gb"] = in_gib;  // alias of memory_increase_gib
}

json latency_totals_json(double e2e_sum_ms, uint64_t n_ok, uint64_t output_tokens,
                         double duration_s) {
  return {{"mean_latency_ms", n_ok > 0 ? e2e_sum_ms / static_cast<double>(n_ok) : 0.0},
          {"tokens_per_second",
           duration_s > 0 ? static_cast<double>(output_tokens) / duration_s : 0.0}};
}

}  // namespace kvprof::results
