// The assumptions of --estimate-with and the causes of a comparison's errors (see
// estimate_check.hpp).
#include "kvprof/profile/estimate_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "kvprof/util/units.hpp"

namespace kvprof::profile {

namespace {

using nlohmann::json;

constexpr double k_cause_threshold_pct = 10.0;

const ComparisonRow* find_row(const std::vector<ComparisonRow>& rows, std::string_view name) {
  for (const auto& r : rows) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::string origin_of(const json& assumptions, const char* key) {
  const auto& s =
      assumptions.is_object() ? assumptions.value("settings", json::object()) : json::object();
  if (!s.contains(key)) return "";
  return s.at(key).value("origin", "");
}

// The evidence a comparison can be checked against, gathered once.
struct Evidence {
  std::optional<uint64_t> gpu_total_bytes;  // of the busiest GPU, as the source reports it
  unsigned busy_gpus = 0;                   // GPUs holding more than 1 GiB at baseline
  std::optional<uint64_t> baseline_bytes;   // busiest GPU at baseline
  std::optional<double> server_blocks;
  std::optional<double> server_max_model_len;
  std::string server_version;
  std::string gpu_origin;
  std::string gpu_note;
};

Evidence gather(const ProfileReport& r) {
  Evidence e;
  const CapturePoint& cp = r.baseline.empty() ? r.peak : r.baseline;
  for (size_t i = 0; i < cp.per_gpu.size(); ++i) {
    if (cp.used_bytes[i] > (1ULL << 30)) ++e.busy_gpus;
    if (cp.used_bytes[i] == cp.max_bytes) {
      e.gpu_total_bytes = cp.per_gpu[i].total_bytes;
      e.baseline_bytes = cp.used_bytes[i];
    }
  }
  if (r.baseline.empty()) e.baseline_bytes.reset();
  if (const auto* b = find_row(r.comparison, "num_gpu_blocks"); b && b->measured) {
    e.server_blocks = *b->measured;
  }
  if (const auto* m = find_row(r.comparison, "max_model_len"); m && m->measured) {
    e.server_max_model_len = *m->measured;
  }
  e.server_version = r.server.version;
  const json& a = r.estimate_assumptions;
  if (a.is_object() && a.contains("gpu")) {
    e.gpu_origin = a["gpu"].value("origin", "");
    e.gpu_note = a["gpu"].value("note", "");
  }
  return e;
}

// The GPU is not the one the plan assumed.
std::optional<std::string> gpu_cause(const Evidence& e, const estimate::Estimate& est) {
  if (!e.gpu_total_bytes || est.gpu.memory_bytes == 0) return std::nullopt;
  const double measured = static_cast<double>(*e.gpu_total_bytes);
  const double assumed = static_cast<double>(est.gpu.memory_bytes);
  if (std::fabs(measured - assumed) <= 0.03 * assumed) return std::nullopt;
  return fmt::format(
      "a different GPU: this one has {:.1f} GiB, the plan assumed {} with {:.1f} GiB ({}{}); give "
      "--gpu",
      bytes_to_gib(*e.gpu_total_bytes), est.gpu.name.empty() ? est.gpu.id : est.gpu.name,
      bytes_to_gib(est.gpu.memory_bytes), e.gpu_origin.empty() ? "assumed" : e.gpu_origin,
      e.gpu_note.empty() ? "" : ": " + e.gpu_note);
}

// More (or fewer) GPUs hold memory than the plan's parallelism uses.
std::optional<std::string> tp_cause(const Evidence& e, const estimate::Estimate& est) {
  const uint32_t tp = est.settings.tensor_parallel_size;
  const uint32_t planned = tp * est.settings.pipeline_parallel_size;
  if (e.busy_gpus <= 1 || e.busy_gpus == planned) return std::nullopt;
  return fmt::format(
      "a different TP: {} GPUs hold the server's memory, the plan uses tensor_parallel_size {} "
      "x pipeline_parallel_size {}; give -tp {}",
      e.busy_gpus, tp, est.settings.pipeline_parallel_size,
      e.busy_gpus / std::max(1U, est.settings.pipeline_parallel_size));
}

// The server's KV block count against the plan's: a different utilization (the memory moves with
// the blocks) or a different KV dtype (more blocks in about the same memory).
std::optional<std::string> kv_cause(const Evidence& e, const estimate::Estimate& est,
                                    const json& assumptions) {
  const auto& rep = est.engine_report;
  if (!e.server_blocks || rep.num_gpu_blocks == 0 || *e.server_blocks <= 0) return std::nullopt;
  const double plan_blocks = static_cast<double>(rep.num_gpu_blocks);
  const double ratio = *e.server_blocks / plan_blocks;
  if (std::fabs(ratio - 1.0) < 0.01) return std::nullopt;
  const double bytes_per_block = static_cast<double>(est.per_gpu.kv_cache_bytes) / plan_blocks;
  const double moved = (*e.server_blocks - plan_blocks) * bytes_per_block;
  bool dtype = std::fabs(ratio - 2.0) < 0.2 || std::fabs(ratio - 0.5) < 0.05;
  if (e.baseline_bytes) {
    // Memory at baseline as the plan has it, and as it would be if the pool grew with the blocks.
    const double plan_used =
        static_cast<double>(est.per_gpu.total_bytes - est.per_gpu.activation_bytes);
    const double used = static_cast<double>(*e.baseline_bytes);
    dtype = std::fabs(used - plan_used) < std::fabs(used - (plan_used + moved));
  }
  if (dtype) {
    return fmt::format(
        "a different KV cache dtype: the server holds {:.2f}x the plan's blocks in about the "
        "memory the plan gives its KV cache (the plan assumed kv_cache_dtype {}, {}); give "
        "--kv-cache-dtype",
        ratio, estimate::kv_cache_dtype_name(est.settings.kv_cache_dtype),
        origin_of(assumptions, "kv_cache_dtype"));
  }
  const double total = static_cast<double>(e.gpu_total_bytes.value_or(est.gpu.memory_bytes));
  const double implied = (static_cast<double>(rep.requested_memory_bytes) + moved) / total;
  const double assumed = rep.memory_fraction;
  if (implied <= 0 || implied > 1.0 || std::fabs(implied - assumed) < 0.01) return std::nullopt;
  return fmt::format(
      "a different gpu-memory-utilization: the server's {:.0f} blocks fit about {:.2f}, the plan "
      "assumed {:g} ({}); give --gpu-memory-utilization {:.2f}",
      *e.server_blocks, implied, assumed, origin_of(assumptions, "gpu_memory_utilization"),
      implied);
}

// The largest step the grid could schedule (input length x concurrency, from the condition ids
// "in<N>_..._c<M>_..."), when it is under half the plan's profile-run batch: activations are
// measured at the load the grid made, not at the profile run's.
std::optional<std::string> grid_cause(const ProfileReport& r, const estimate::Estimate& est) {
  const uint64_t batch = est.engine_report.max_num_batched_tokens;
  if (batch == 0 || r.conditions.empty()) return std::nullopt;
  uint64_t largest = 0;
  for (const auto& c : r.conditions) {
    const std::string& id = c.requests.condition_id;
    if (!id.starts_with("in")) return std::nullopt;
    const uint64_t input = std::strtoull(id.c_str() + 2, nullptr, 10);
    largest = std::max(largest, input * std::max<uint64_t>(1, c.requests.concurrency));
  }
  largest = std::min(largest, batch);
  if (largest == 0 || largest * 2 >= batch) return std::nullopt;
  return fmt::format(
      "the grid's largest step (about {} tokens) is far below the plan's profile run ({} "
      "tokens): activations are measured at the load the grid made; raise --input-lens or "
      "--concurrencies",
      largest, batch);
}

std::string version_cause(const Evidence& e, const estimate::Estimate& est,
                          const ProfileReport& r) {
  if (r.simulated && r.simulation_details.is_object() &&
      r.simulation_details.value("jitter", json()).is_object()) {
    const json& j = r.simulation_details["jitter"];
    return fmt::format(
        "the simulated engine's own behaviour (seed {}: non-torch x{:.2f}, activations x{:.2f}, "
        "CUDA graphs x{:.2f}, fragmentation {:.0f}%)",
        j.value("seed", 0), j.value("non_torch_factor", 1.0), j.value("activation_factor", 1.0),
        j.value("cuda_graph_factor", 1.0), j.value("fragmentation_fraction", 0.0) * 100);
  }
  return fmt::format("another engine version: kvprof models {} {}{}",
                     engines::engine_name(est.settings.engine),
                     modelled_engine_version(est.settings),
                     e.server_version.empty() ? "" : ", the server reports " + e.server_version);
}

}  // namespace

void add_server_rows(const ServerInfo& server, const std::string& model,
                     const estimate::Estimate& est, std::vector<ComparisonRow>& rows) {
  if (est.engine_report.max_model_len == 0 || server.max_model_len_tokens.empty()) return;
  auto it = server.max_model_len_tokens.find(model);
  if (it == server.max_model_len_tokens.end()) it = server.max_model_len_tokens.begin();
  ComparisonRow row{"max_model_len",
                    "tokens",
                    static_cast<double>(it->second),
                    static_cast<double>(est.engine_report.max_model_len),
                    std::nullopt,
                    Confidence::high};
  if (it->second > 0) {
    row.error_pct = (*row.estimated - *row.measured) / *row.measured * 100.0;
  }
  rows.push_back(row);
}

std::vector<std::string> diagnose_comparison(const ProfileReport& r,
                                             const estimate::Estimate& est) {
  const Evidence e = gather(r);
  const json& a = r.estimate_assumptions;
  const auto gpu = gpu_cause(e, est);
  const auto tp = tp_cause(e, est);
  const auto kv = kv_cause(e, est, a);
  const std::string version = version_cause(e, est, r);
  std::vector<std::string> lines;
  for (const auto& row : r.comparison) {
    if (!row.error_pct || std::fabs(*row.error_pct) <= k_cause_threshold_pct) continue;
    std::optional<std::string> cause;
    const std::string& n = row.name;
    if (n == "max_model_len") {
      cause = fmt::format(
          "a different max-model-len: the server takes {:.0f} tokens per request, the plan "
          "assumed {:.0f} ({}); give --max-model-len {:.0f}",
          *row.measured, *row.estimated, origin_of(a, "max_model_len"), *row.measured);
    } else if (n == "num_gpu_blocks" || n == "kv_cache_tokens" || n == "kv_cache") {
      cause = gpu ? gpu : tp ? tp : kv;
      if (!gpu && !e.gpu_total_bytes && e.gpu_origin == "assumed") {
        // Nothing says which GPU the server has: the assumed one is the first suspect.
        cause = fmt::format("the GPU the plan assumed ({} with {:.1f} GiB{})",
                            est.gpu.name.empty() ? est.gpu.id : est.gpu.name,
                            bytes_to_gib(est.gpu.memory_bytes),
                            e.gpu_note.empty() ? "" : ", " + e.gpu_note + "; give --gpu");
      }
    } else if (n == "weights") {
      cause = tp ? tp : gpu;
      if (!cause && kv)
        cause = "the KV pool: weights are the baseline less the KV pool, and " + *kv;
      if (!cause) cause = "a different dtype or quantization; give --dtype or -q";
    } else if (n == "total") {
      cause = gpu ? gpu : tp ? tp : kv;
    } else if (n == "activations") {
      cause = tp ? tp : grid_cause(r, est);
    } else {  // overhead
      cause = tp;
    }
    if (!cause) cause = version;
    std::string line = fmt::format("{}: {:+.1f}%", n, *row.error_pct);
    if (n == "num_gpu_blocks" && row.measured && row.estimated && *row.measured > 0 &&
        *row.estimated > 0) {
      const double ratio = *row.measured / *row.estimated;
      if (ratio > 2.0 || ratio < 0.5) {
        line += fmt::format(
            " (the server has {:.2f}x the plan's blocks: the flags probably do not describe "
            "this server)",
            ratio);
      }
    }
    lines.push_back(line + "; likely cause: " + *cause);
  }
  return lines;
}

void annotate_summary(const ProfileReport& r, json& summary) {
  const std::string nature = r.simulated ? std::string(k_simulated_nature) : "measured";
  summary["simulation"] = r.simulation_details;
  json& b = summary["memory_breakdown"];
  if (b.is_object()) {
    b["nature"] = nature;
    if (r.simulated) b["confidence_levels"]["overall"] = nature;
  }
  json& c = summary["estimate_comparison"];
  if (c.is_object()) {
    c["nature"] = nature;
    c["assumptions"] = r.estimate_assumptions;
    c["likely_causes"] = r.estimate_diagnosis;
  }
}

std::string estimate_check_text(const ProfileReport& r) {
  if (r.comparison.empty()) return "";
  std::string out = assumptions_text(r.estimate_assumptions);
  for (const auto& line : r.estimate_diagnosis)
    out += "estimate check: " + line + "\n";
  if (r.simulated) {
    const json jitter =
        r.simulation_details.is_object() ? r.simulation_details.value("jitter", json()) : json();
    std::string how = " (kvprof serve-sim)";
    if (jitter.is_object()) {
      how = fmt::format(" with engine jitter (repeat with --sim-seed {})", jitter.value("seed", 0));
    } else if (r.simulation_details.is_object()) {
      how = " exactly (no engine jitter)";
    }
    out += fmt::format("errors are {}: the server was sized by the same planner{}\n",
                       k_simulated_nature, how);
  }
  return out;
}

}  // namespace kvprof::profile
