// The sweep's table, JSON and files (see sweep_summary.hpp).
#include "kvprof/experiment/sweep_summary.hpp"

#include <fmt/format.h>

#include <chrono>

#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "kvprof/util/atomic_file.hpp"
#include "kvprof/util/clock.hpp"
#include "kvprof/util/json_text.hpp"
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

json estimate_json(const PlannedConfig& pc) {
  if (!pc.estimate) return json();
  const auto& est = *pc.estimate;
  return {{"per_gpu_total_bytes", est.per_gpu.total_bytes},
          {"weights_bytes", est.per_gpu.weights_bytes},
          {"kv_cache_bytes", est.per_gpu.kv_cache_bytes},
          {"activation_bytes", est.per_gpu.activation_bytes},
          {"overhead_bytes", est.per_gpu.overhead_bytes()},
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

// What a configuration measured, as sweep.json shows it: the run's figures and each condition's
// (with the run that measured it when a resumed configuration has several).
json measured_json(const ConfigRecord& r) {
  json m = json::object();
  for (const auto& f : run_fields())
    m[f.name] = figure_json(r.figures.*f.member);
  json conditions = json::object();
  for (const auto& [cid, c] : r.conditions) {
    json cj = json::object();
    for (const auto& f : condition_fields())
      cj[f.name] = figure_json(c.*f.member);
    if (!c.completed) cj["completed"] = false;
    if (r.runs.size() > 1 && c.run < r.runs.size()) cj["run_id"] = r.runs[c.run].run_id;
    conditions[cid] = std::move(cj);
  }
  m["conditions"] = std::move(conditions);
  return m;
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
              {"pipeline_parallel_size", e.pipeline_parallel_size},
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
  if (!e.container_name.empty()) j["container_name"] = e.container_name;
  if (const ConfigRecord* r = record_of(state, pc)) {
    j["run"] = {{"run_id", r->run_id},
                {"run_dir", r->run_dir},
                {"reason", r->reason},
                {"attempts", r->attempts},
                {"started_unix_s", r->started_unix_s},
                {"duration_s", r->duration_s},
                {"measured", measured_json(*r)}};
    if (!r->job_id.empty()) j["run"]["job"] = {{"id", r->job_id}, {"node", r->node}};
    if (r->runs.size() > 1) {
      json runs = json::array();
      for (const auto& run : r->runs)
        runs.push_back({{"run_id", run.run_id}, {"run_dir", run.run_dir}});
      j["run"]["runs"] = std::move(runs);
    }
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

// A figure for the CSV: whole numbers in full (byte counts), others to 6 significant digits.
std::string csv_number(const std::optional<double>& v) {
  if (!v) return "";
  if (std::trunc(*v) == *v && std::fabs(*v) < 1e18) return fmt::format("{:.0f}", *v);
  return fmt::format("{:.6g}", *v);
}

std::string csv_value(const json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return csv_field(v.get<std::string>());
  if (v.is_number_float()) return fmt::format("{:.6g}", v.get<double>());
  return v.dump();
}

// A configuration as sweep.json shows it, indented `spaces` past the left edge: pretty, but
// each condition on one line (a sweep of thousands of conditions stays about 300 bytes each).
std::string config_text(const PlannedConfig& pc, const SweepState& state, size_t spaces) {
  static const std::string token = fmt::format("kvprof-splice-{:016x}", std::random_device{}());
  json j = config_json(pc, state);
  std::vector<json> lists;  // taken out of `j`, a placeholder string in their place
  const auto take = [&](json& v) {
    if (v.empty()) return;
    lists.push_back(std::move(v));
    v = fmt::format("{}-{}", token, lists.size() - 1);
  };
  take(j["conditions"]);
  if (j.contains("run")) take(j["run"]["measured"]["conditions"]);
  std::string text = json_text(j, 2);
  for (size_t i = 0; i < lists.size(); ++i) {
    const std::string mark = fmt::format("\"{}-{}\"", token, i);
    const size_t at = text.find(mark);
    if (at == std::string::npos) continue;
    const size_t line = text.rfind('\n', at);
    const size_t indent = text.find_first_not_of(' ', line + 1) - (line + 1);
    const bool array = lists[i].is_array();
    std::string items;
    for (const auto& [key, value] : lists[i].items()) {
      items += items.empty() ? "\n" : ",\n";
      items.append(indent + 2, ' ');
      if (!array) items += json_text(key) + ": ";
      items += json_text(value);
    }
    text.replace(
        at, mark.size(),
        (array ? "[" : "{") + items + "\n" + std::string(indent, ' ') + (array ? "]" : "}"));
  }
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (const char c : text) {
    out += c;
    if (c == '\n') out.append(spaces, ' ');
  }
  return out;
}

// sweep_summary.csv, a row per condition, written as it goes.
void write_summary_csv(std::ostream& out, const Plan& plan, const SweepState& state) {
  out << "configuration,model_id,tensor_parallel_size,dtype,quantization,kv_cache_dtype,"
         "gpu_memory_utilization,max_model_len,gpu,input_len,output_len,batch_size,status,run_id,"
         "est_per_gpu_total_bytes,est_kv_capacity_bytes,est_kv_needed_bytes,est_fits,"
         "peak_used_bytes,peak_rss_bytes,peak_kv_cache_usage,ttft_p50_ms,e2e_mean_ms,output_"
         "tokens_per_s,preemptions,n_ok,n_errors,note\n";
  const ConditionFigures none;
  for (const auto& pc : plan.configs) {
    const ModelEntry& e = pc.entry;
    const ConfigRecord* r = record_of(state, pc);
    const std::string status = status_of(state, pc);
    for (const auto& c : pc.conditions) {
      const std::string cid = workload::condition_id(c.input_len, c.output_len, c.batch_size,
                                                     workload::PrefixMode::low);
      const ConditionFigures* m = &none;
      std::string run_id = r ? r->run_id : "";
      if (r) {
        if (const auto it = r->conditions.find(cid); it != r->conditions.end()) {
          m = &it->second;
          if (m->run < r->runs.size()) run_id = r->runs[m->run].run_id;
        }
      }
      std::string note = c.note;
      if (r && !r->reason.empty()) note = r->reason + (note.empty() ? "" : "; " + note);
      out << fmt::format(
          "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
          csv_field(pc.id), csv_field(e.model_id), e.tensor_parallel_size, csv_field(e.dtype),
          csv_field(e.quantization), csv_field(e.kv_cache_dtype),
          csv_value(opt_json(e.gpu_memory_utilization)), csv_value(opt_json(e.max_model_len)),
          csv_field(pc.gpu), c.input_len, c.output_len, c.batch_size, status, csv_field(run_id),
          pc.estimate ? std::to_string(pc.estimate->per_gpu.total_bytes) : "",
          pc.estimate ? std::to_string(c.kv_capacity_bytes) : "",
          pc.estimate ? std::to_string(c.kv_needed_bytes) : "", c.fits && pc.fits ? "yes" : "no",
          csv_number(m->peak_used_bytes), csv_number(m->peak_rss_bytes),
          csv_number(m->peak_kv_cache_usage), csv_number(m->ttft_p50_ms),
          csv_number(m->e2e_mean_ms), csv_number(m->output_tokens_per_s),
          csv_number(m->preemptions), csv_number(m->n_ok), csv_number(m->n_errors),
          csv_field(note));
    }
  }
}

// The plan's fields other than its configurations.
json plan_head_json(const Plan& plan) {
  size_t n_runnable = 0;
  for (const auto& pc : plan.configs)
    n_runnable += pc.fits ? 1 : 0;
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
                       k_assumed_startup_s, k_flops_fraction * 100, k_bandwidth_fraction * 100)}};
}

}  // namespace

json plan_json(const Plan& plan, const SweepState& state) {
  json out = plan_head_json(plan);
  json configs = json::array();
  for (const auto& pc : plan.configs)
    configs.push_back(config_json(pc, state));
  out["configurations"] = std::move(configs);
  return out;
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
  // Written a configuration at a time: memory stays that of one configuration's JSON.
  const auto write_json = [&](std::ostream& out) {
    json head = plan_head_json(plan);
    head["config_file"] = config_file;
    head["status"] = status;
    head["first_started_unix_s"] = state.first_started_unix_s;
    head["updated_unix_s"] = unix_now_s();
    head["files"] = {{"summary_csv", "sweep_summary.csv"}, {"state", "sweep_state.json"}};
    std::string text = json_text(head, 2);
    while (!text.empty() && (text.back() == '}' || text.back() == '\n'))
      text.pop_back();
    out << text << ",\n  \"configurations\": [";
    for (size_t i = 0; i < plan.configs.size(); ++i) {
      out << (i == 0 ? "\n    " : ",\n    ") << config_text(plan.configs[i], state, 4);
    }
    out << "\n  ]\n}\n";
  };
  if (auto r = write_file_atomically(dir / "sweep.json", write_json); !r) return r;
  return write_file_atomically(dir / "sweep_summary.csv",
                               [&](std::ostream& out) { write_summary_csv(out, plan, state); });
}

}  // namespace kvprof::experiment
