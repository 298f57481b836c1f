// Measured vs estimated per component (see validate.hpp).
#include "kvprof/experiment/validate.hpp"

#include <fmt/format.h>

#include <cmath>

#include "kvprof/report/text/table.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::experiment {

using nlohmann::json;

namespace {

// The engine's own figure of a component: vLLM's weights, KV pool, profile-run peak and
// non-torch + CUDA graphs; llama.cpp's model, KV and compute buffers.
std::optional<double> reported(const results::RunSummary& r, const std::string& component) {
  const auto get = [&](const char* name) -> std::optional<double> {
    const auto it = r.reported.find(name);
    if (it == r.reported.end()) return std::nullopt;
    return static_cast<double>(it->second);
  };
  if (component == "weights") return get("weights");
  if (component == "kv_cache") return get("kv_cache");
  if (component == "activations") {
    if (auto a = get("activation_peak")) return a;
    return get("compute");
  }
  if (component == "overhead") {
    const auto nt = get("non_torch");
    const auto graphs = get("cuda_graph");
    if (!nt && !graphs) return std::nullopt;
    return nt.value_or(0) + graphs.value_or(0);
  }
  return std::nullopt;
}

// Why a component's figure differs from the reference. `compute_buffers`: the activations
// compared are llama.cpp's compute buffers as it states them (no GPU memory was sampled).
std::string hint(const std::string& component, bool over, bool compute_buffers) {
  if (component == "activations" && compute_buffers) {
    return "llama.cpp sizes its compute buffers from -c, -ub and flash attention (off, the graph "
           "holds the n_ctx x n_ubatch attention matrix of each head); check that the "
           "reference used the server's -fa, -ub and -c, and its release's defaults";
  }
  if (component == "weights") {
    return over ? "the reference counts more weight bytes than were loaded: check the dtype or "
                  "quantization it assumed, a draft model, tied embeddings"
                : "more was loaded than the reference counts: weights loaded at a higher precision "
                  "than assumed, vision/audio towers, or the CUDA context and non-torch memory "
                  "landing in the baseline";
  }
  if (component == "kv_cache") {
    return over ? "the engine's KV pool is smaller than assumed: its memory fraction, max model "
                  "length, block count or KV dtype differ from the reference's settings"
                : "the engine's KV pool is bigger than assumed: it takes what is left of its "
                  "memory fraction, not what the workload needs";
  }
  if (component == "activations") {
    return over ? "the workload's batches never reached the profile run's token budget "
                  "(max_num_batched_tokens); activations are measured as peak - post-warmup"
                : "batches larger than the reference assumed, or allocator fragmentation raising "
                  "the peak";
  }
  if (component == "overhead") {
    return over ? "less framework memory than assumed: no CUDA graphs (--enforce-eager), or "
                  "smaller workspaces"
                : "more framework memory than assumed (CUDA graphs, NCCL buffers, allocator "
                  "caching); the overhead is a residual, so the other components' errors land "
                  "here too";
  }
  return over ? "the reference plans more memory than was used"
              : "more memory was used than the reference plans";
}

std::string gib_text(const std::optional<double>& bytes) {
  return bytes ? fmt::format("{:.2f}", *bytes / k_gib) : "-";
}

}  // namespace

AccuracyBand accuracy_band(const std::string& component) {
  if (component == "weights") return {2, "95-100%"};
  if (component == "kv_cache") return {15, "80-95%"};
  if (component == "activations") return {30, "60-85%"};
  if (component == "overhead") return {40, "50-80%"};
  return {10, "85-95%"};
}

Validation validate_run(const results::RunSummary& run,
                        const std::map<std::string, double>& reference_bytes,
                        std::string reference) {
  Validation v;
  v.run = run;
  v.reference = std::move(reference);
  double worst = -1;
  const ValidationRow* worst_row = nullptr;
  for (std::string_view c : results::k_components) {
    ValidationRow row;
    row.component = std::string(c);
    row.band = accuracy_band(row.component);
    if (const auto it = run.measured.find(row.component); it != run.measured.end()) {
      if (it->second.bytes) row.sampled_bytes = static_cast<double>(*it->second.bytes);
      row.sampled_confidence = it->second.confidence;
    }
    row.reported_bytes = reported(run, row.component);
    if (const auto it = reference_bytes.find(row.component); it != reference_bytes.end()) {
      row.reference_bytes = it->second;
    }
    const auto measured = row.sampled_bytes ? row.sampled_bytes : row.reported_bytes;
    if (measured && row.reference_bytes && *measured > 0) {
      row.error_pct = (*row.reference_bytes - *measured) / *measured * 100.0;
      row.error_against = row.sampled_bytes ? "sampled" : "reported by engine";
      row.within_band = std::fabs(*row.error_pct) <= row.band.pct;
    }
    if (!row.sampled_bytes && !row.reported_bytes && !row.reference_bytes) continue;
    v.rows.push_back(std::move(row));
  }
  for (const auto& row : v.rows) {
    if (!row.error_pct) continue;
    const double score = std::fabs(*row.error_pct) / row.band.pct;
    if (score > worst) {
      worst = score;
      worst_row = &row;
    }
  }
  if (worst_row == nullptr) {
    v.diagnosis = "no component has both a measurement and a reference figure";
    return v;
  }
  const auto& w = *worst_row;
  if (std::fabs(*w.error_pct) < 0.05) {
    v.diagnosis = "every figure compared is the reference's (within 0.05%)";
    return v;
  }
  v.largest_gap = w.component;
  const double measured = w.sampled_bytes ? *w.sampled_bytes : *w.reported_bytes;
  v.diagnosis = fmt::format(
      "largest gap: {} — reference {} GiB vs {} {} GiB ({:+.1f}%, {} the ±{:.0f}% expected): {}",
      w.component, gib_text(w.reference_bytes), w.error_against, gib_text(measured), *w.error_pct,
      *w.within_band ? "within" : "outside", w.band.pct,
      hint(w.component, *w.error_pct > 0,
           !w.sampled_bytes && run.reported.contains("compute") &&
               !run.reported.contains("activation_peak")));
  return v;
}

json validation_json(const Validation& v) {
  json rows = json::array();
  for (const auto& r : v.rows) {
    rows.push_back({{"component", r.component},
                    {"sampled_bytes", opt_json(r.sampled_bytes)},
                    {"sampled_confidence", r.sampled_confidence},
                    {"reported_bytes", opt_json(r.reported_bytes)},
                    {"reference_bytes", opt_json(r.reference_bytes)},
                    {"error_pct", opt_json(r.error_pct)},
                    {"error_against", r.error_against},
                    {"expected_band_pct", r.band.pct},
                    {"expected_match", r.band.expected_match},
                    {"within_band", r.within_band ? json(*r.within_band) : json(nullptr)}});
  }
  return {{"schema_version", 1},
          {"run_id", v.run.id},
          {"run_dir", v.run.dir.string()},
          {"kind", v.run.kind},
          {"memory", v.run.memory},
          {"engine", v.run.engine},
          {"engine_version", v.run.engine_version},
          {"simulated", v.run.simulated},
          {"reference", v.reference},
          {"components", rows},
          {"largest_gap", v.largest_gap.empty() ? json(nullptr) : json(v.largest_gap)},
          {"diagnosis", v.diagnosis}};
}

std::string validation_text(const Validation& v) {
  std::string out = fmt::format(
      "validate {} ({} run, {} memory{}{}) against {}\n", v.run.id, v.run.kind, v.run.memory,
      v.run.engine.empty()
          ? ""
          : ", " + v.run.engine + (v.run.engine_version.empty() ? "" : " " + v.run.engine_version),
      v.run.simulated ? ", SIMULATED" : "", v.reference);
  report::text::Table t({"component", "sampled GiB", "confidence", "engine GiB", "reference GiB",
                         "error", "expected", "verdict"});
  for (const auto& r : v.rows) {
    t.add_row({r.component, gib_text(r.sampled_bytes),
               r.sampled_confidence.empty() ? "-" : r.sampled_confidence,
               gib_text(r.reported_bytes), gib_text(r.reference_bytes),
               r.error_pct ? fmt::format("{:+.1f}%", *r.error_pct) : "-",
               fmt::format("±{:.0f}%", r.band.pct),
               !r.within_band   ? "-"
               : *r.within_band ? "within"
                                : "OUTSIDE"});
  }
  out += t.render();
  out += v.diagnosis + "\n";
  return out;
}

}  // namespace kvprof::experiment
