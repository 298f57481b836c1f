// The sweep's table, JSON and files (see sweep_report.hpp).
#include "kvprof/experiment/sweep_report.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>

#include "kvprof/profile/manifest.hpp"
#include "kvprof/util/units.hpp"
#include "kvprof/workload/workload.hpp"

namespace kvprof::experiment {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const ConfigRecord* record_of(const SweepState& state, const PlannedConfig& pc) {
  const auto it = state.records.find(pc.fingerprint);
  return it == state.records.end() ? nullptr : &it->second;
}

std::string status_of(const SweepState& state, const PlannedConfig& pc) {
  const ConfigRecord* r = record_of(state, pc);
  return r && !r->status.empty() ? r->status : "pending";
}

json opt_json(const auto& v) {
  return v ? json(*v) : json();
}

json estimate_json(const PlannedConfig& pc) {
  if (!pc.estimate) return json();
  const auto& est = *pc.estimate;
  return {{"per_gpu_total_bytes", est.per_gpu.total_bytes},
          {"weights_bytes", est.per_gpu.weights_bytes},
          {"kv_cache_bytes", est.per_gpu.kv_cache_bytes},
          {"activation_bytes", est.per_gpu.activation_bytes},
          {"cuda_graph_bytes", est.per_gpu.cuda_graph_bytes},
          {"gpu_memory_bytes", est.gpu.memory_bytes},
          {"headroom_bytes", est.headroom_bytes},
          {"kv_capacity_bytes", est.kv_capacity_bytes},
          {"kv_cache_tokens", est.engine_report.kv_cache_tokens},
          {"max_concurrency", est.engine_report.max_concurrency},
          {"gpus", est.gpus_total},
          {"verdict", estimate::verdict_name(est.verdict)},
          {"confidence", est.confidence}};
}

json config_json(const PlannedConfig& pc, const SweepState& state) {
  const ModelEntry& e = pc.entry;
  json conditions = json::array();
  for (const auto& c : pc.conditions) {
    conditions.push_back({{"input_len", c.input_len},
                          {"output_len", c.output_len},
                          {"batch_size", c.batch_size},
                          {"kv_needed_bytes", c.kv_needed_bytes},
                          {"kv_capacity_bytes", c.kv_capacity_bytes},
                          {"fits", c.fits},
                          {"refused", c.refused},
                          {"note", c.note},
                          {"expected_s", c.expected_s}});
  }
  json j = {{"index", e.index},
            {"id", pc.id},
            {"fingerprint", pc.fingerprint},
            {"label", pc.label},
            {"model_id", e.model_id},
            {"settings",
             {{"dtype", e.dtype},
              {"tensor_parallel_size", e.tensor_parallel_size},
              {"quantization", e.quantization},
              {"kv_cache_dtype", e.kv_cache_dtype},
              {"gpu_memory_utilization", opt_json(e.gpu_memory_utilization)},
              {"max_model_len", opt_json(e.max_model_len)},
              {"engine", pc.engine}}},
            {"gpu", pc.gpu},
            {"server", server_kind_name(pc.server)},
            {"n_conditions", pc.conditions.size()},
            {"n_requests", pc.n_requests},
            {"estimate", estimate_json(pc)},
            {"fits", pc.fits},
            {"reason", pc.reason},
            {"notes", pc.notes},
            {"expected_s", pc.expected_s},
            {"conditions", conditions},
            {"status", status_of(state, pc)}};
  if (const ConfigRecord* r = record_of(state, pc)) {
    j["run"] = {{"run_id", r->run_id},
                {"run_dir", r->run_dir},
                {"reason", r->reason},
                {"attempts", r->attempts},
                {"started_unix_s", r->started_unix_s},
                {"duration_s", r->duration_s},
                {"measured", r->measured}};
  }
  return j;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

std::string csv_value(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return csv_field(v.get<std::string>());
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  return v.dump();
}

Expected<void> write_text(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + fmt::format(".tmp.{}", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return fail(ErrorKind::io, fmt::format("{}: cannot be written", path.string()));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return fail(ErrorKind::io, fmt::format("{}: {}", path.string(), ec.message()));
  return {};
}

std::string summary_csv(const Plan& plan, const SweepState& state) {
  std::string out =
      "configuration,model_id,tensor_parallel_size,dtype,quantization,kv_cache_dtype,"
      "gpu_memory_utilization,max_model_len,gpu,input_len,output_len,batch_size,status,run_id,"
      "est_per_gpu_total_bytes,est_kv_capacity_bytes,est_kv_needed_bytes,est_fits,"
      "peak_used_bytes,peak_rss_bytes,peak_kv_cache_usage,ttft_p50_ms,e2e_mean_ms,output_tokens_"
      "per_s,"
      "preemptions,n_ok,n_errors,note\n";
  for (const auto& pc : plan.configs) {
    const ModelEntry& e = pc.entry;
    const ConfigRecord* r = record_of(state, pc);
    for (const auto& c : pc.conditions) {
      const std::string cid = workload::condition_id(c.input_len, c.output_len, c.batch_size,
                                                     workload::PrefixMode::low);
      json m = json::object();
      if (r && r->measured.contains("conditions") && r->measured["conditions"].contains(cid))
        m = r->measured["conditions"][cid];
      const auto mv = [&](const char* k) { return csv_value(m.value(k, json())); };
      std::string note = c.note;
      if (r && !r->reason.empty()) note = r->reason + (note.empty() ? "" : "; " + note);
      out += fmt::format(
          "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
          csv_field(pc.id), csv_field(e.model_id), e.tensor_parallel_size, csv_field(e.dtype),
          csv_field(e.quantization), csv_field(e.kv_cache_dtype),
          csv_value(opt_json(e.gpu_memory_utilization)), csv_value(opt_json(e.max_model_len)),
          csv_field(pc.gpu), c.input_len, c.output_len, c.batch_size, status_of(state, pc),
          csv_field(r ? r->run_id : ""),
          pc.estimate ? std::to_string(pc.estimate->per_gpu.total_bytes) : "",
          pc.estimate ? std::to_string(c.kv_capacity_bytes) : "",
          pc.estimate ? std::to_string(c.kv_needed_bytes) : "", c.fits && pc.fits ? "yes" : "no",
          mv("peak_used_bytes"), mv("peak_rss_bytes"), mv("peak_kv_cache_usage"), mv("ttft_p50_ms"),
          mv("e2e_mean_ms"), mv("output_tokens_per_s"), mv("preemptions"), mv("n_ok"),
          mv("n_errors"), csv_field(note));
    }
  }
  return out;
}

}  // namespace

json plan_json(const Plan& plan, const SweepState& state) {
  json configs = json::array();
  size_t n_runnable = 0;
  for (const auto& pc : plan.configs) {
    configs.push_back(config_json(pc, state));
    n_runnable += pc.fits ? 1 : 0;
  }
  return {{"schema_version", 1},
          {"name", plan.name},
          {"n_configurations", plan.configs.size()},
          {"n_runnable", n_runnable},
          {"n_conditions", plan.n_conditions},
          {"n_requests", plan.n_requests},
          {"expected_s", plan.expected_s},
          {"time_model",
           fmt::format("server start {:.0f} s when launched; prefill at {:.0f}% of peak bf16 "
                       "FLOP/s, decode at {:.0f}% of peak memory bandwidth",
                       k_assumed_startup_s, k_flops_fraction * 100, k_bandwidth_fraction * 100)},
          {"configurations", configs}};
}

std::string plan_text(const Plan& plan, const SweepState& state) {
  size_t n_runnable = 0, n_done = 0;
  for (const auto& pc : plan.configs) {
    n_runnable += pc.fits ? 1 : 0;
    const ConfigRecord* r = record_of(state, pc);
    n_done += r && r->finished() ? 1 : 0;
  }
  std::string out = fmt::format(
      "sweep '{}': {} configuration(s) ({} will run{}), {} conditions, {} requests; expected time "
      "{}\n\n",
      plan.name, plan.configs.size(), n_runnable,
      n_done > 0 ? fmt::format(", {} already finished", n_done) : "", plan.n_conditions,
      plan.n_requests, format_duration(plan.expected_s));
  out +=
      fmt::format("{:<3} {:<52} {:<9} {:>10} {:>10} {:<5} {:>5} {:>9}  {}\n", "#", "configuration",
                  "GPU", "mem/GPU", "KV tokens", "fits", "conds", "time", "status");
  for (const auto& pc : plan.configs) {
    std::string label = pc.label;
    if (label.size() > 52) label = label.substr(0, 49) + "...";
    const std::string mem =
        pc.estimate ? fmt::format("{:.1f} GiB", bytes_to_gib(pc.estimate->per_gpu.total_bytes))
                    : "-";
    const std::string kv =
        pc.estimate ? std::to_string(pc.estimate->engine_report.kv_cache_tokens) : "-";
    out +=
        fmt::format("{:<3} {:<52} {:<9} {:>10} {:>10} {:<5} {:>5} {:>9}  {}\n", pc.entry.index + 1,
                    label, pc.gpu.substr(0, 9), mem, kv, pc.fits ? "yes" : "NO",
                    pc.conditions.size(), format_duration(pc.expected_s), status_of(state, pc));
  }
  std::string unfit, notes;
  for (const auto& pc : plan.configs) {
    if (!pc.fits) unfit += fmt::format("  {:<3} {}: {}\n", pc.entry.index + 1, pc.label, pc.reason);
    for (const auto& n : pc.notes)
      notes += fmt::format("  {:<3} {}\n", pc.entry.index + 1, n);
    for (const auto& c : pc.conditions) {
      if (!c.fits && pc.fits) {
        notes += fmt::format("  {:<3} input {} + output {} at batch {}: {}\n", pc.entry.index + 1,
                             c.input_len, c.output_len, c.batch_size, c.note);
      }
    }
  }
  if (!unfit.empty()) out += "\nwill not fit (skipped unless --run-unfit):\n" + unfit;
  if (!notes.empty()) out += "\nnotes:\n" + notes;
  out += fmt::format(
      "\ntime: server start {:.0f} s when launched, prefill at {:.0f}% of peak FLOP/s, decode at "
      "{:.0f}% of peak bandwidth (rough; the sweep rescales it from its own runs)\n",
      k_assumed_startup_s, k_flops_fraction * 100, k_bandwidth_fraction * 100);
  return out;
}

Expected<void> write_sweep_files(const fs::path& dir, const Plan& plan, const SweepState& state,
                                 const std::string& config_file, const std::string& status) {
  json j = plan_json(plan, state);
  j["config_file"] = config_file;
  j["status"] = status;
  j["first_started_unix_s"] = state.first_started_unix_s;
  j["files"] = {{"summary_csv", "sweep_summary.csv"}, {"state", "sweep_state.json"}};
  if (auto r = profile::write_json_file(dir / "sweep.json", j); !r) return r;
  return write_text(dir / "sweep_summary.csv", summary_csv(plan, state));
}

}  // namespace kvprof::experiment
