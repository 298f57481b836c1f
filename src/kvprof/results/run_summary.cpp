// A run's summary.json read into its typed summary (see run_summary.hpp).
#include "kvprof/results/run_summary.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "kvprof/util/json_input.hpp"
#include "kvprof/util/json_text.hpp"
#include "kvprof/util/utf8.hpp"

namespace kvprof::results {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t k_max_settings = 400;
constexpr size_t k_max_value_chars = 300;
constexpr size_t k_max_conditions = 10000;
constexpr size_t k_max_summary_command_chars = 8192;
constexpr size_t k_max_command_tokens = 512;

// The member `key` of an object, or null.
const json* member(const json* j, std::string_view key) {
  if (j == nullptr || !j->is_object()) return nullptr;
  const auto it = j->find(key);
  return it == j->end() ? nullptr : &*it;
}

const json* path(const json& j, std::initializer_list<std::string_view> keys) {
  const json* at = &j;
  for (auto k : keys)
    at = member(at, k);
  return at;
}

std::optional<double> number(const json* j) {
  if (j == nullptr || !j->is_number()) return std::nullopt;
  return j->get<double>();
}

std::optional<uint64_t> bytes(const json* j) {
  if (j == nullptr) return std::nullopt;
  if (j->is_number_unsigned()) return j->get<uint64_t>();
  if (j->is_number_integer()) {
    const auto v = j->get<int64_t>();
    return v >= 0 ? std::optional<uint64_t>(static_cast<uint64_t>(v)) : std::nullopt;
  }
  if (j->is_number_float()) {
    const double v = j->get<double>();
    if (!(v >= 0 && v < 1.8e19)) return std::nullopt;
    return static_cast<uint64_t>(v);
  }
  return std::nullopt;
}

// At most `max_chars` of a command, cut between words so that no flag loses part of its name.
std::string_view words_prefix(std::string_view command, size_t max_chars) {
  if (command.size() <= max_chars) return command;
  const size_t space = command.substr(0, max_chars + 1).find_last_of(" \t\n");
  return command.substr(0, space == std::string_view::npos ? 0 : space);
}

std::string text(const json* j) {
  if (j == nullptr || !j->is_string()) return {};
  return to_valid_utf8(utf8_prefix(j->get_ref<const std::string&>(), k_max_value_chars));
}

// A setting's value as text: strings as they are, anything else as compact JSON.
std::string value_text(const json& j) {
  std::string out = to_valid_utf8(j.is_string() ? j.get<std::string>() : json_text(j));
  if (out.size() > k_max_value_chars)
    out = std::string(utf8_prefix(out, k_max_value_chars)) + "...";
  return out;
}

bool volatile_setting(std::string_view key) {
  for (std::string_view k : {"endpoint", "output_dir", "run_tag", "launch", "host_pid"}) {
    if (key == k ||
        (key.size() > k.size() && key.ends_with(k) && key[key.size() - k.size() - 1] == '.')) {
      return true;
    }
  }
  return false;
}

void flatten(const json& j, const std::string& prefix, int depth,
             std::map<std::string, std::string>& out) {
  if (!j.is_object()) return;
  for (const auto& [k, v] : j.items()) {
    if (out.size() >= k_max_settings) return;
    const std::string key =
        to_valid_utf8(prefix.empty() ? k.substr(0, 100) : prefix + "." + k.substr(0, 100));
    if (volatile_setting(key)) continue;
    if (v.is_object() && depth < 3) {
      flatten(v, key, depth + 1, out);
    } else if (!v.is_null()) {
      out[key] = value_text(v);
    }
  }
}

MeasuredComponent component(const json* c) {
  MeasuredComponent m;
  m.bytes = bytes(member(c, "bytes"));
  m.confidence = text(member(c, "confidence"));
  m.method = text(member(c, "method"));
  return m;
}

// The member `key` of `c`, or where a bench summary of the first layout (schema 1) kept it.
const json* either(const json& c, std::string_view key, std::string_view first_layout_key) {
  const json* j = member(&c, key);
  return j != nullptr ? j : member(&c, first_layout_key);
}

ConditionSummary condition(const json& c, bool bench) {
  ConditionSummary f;
  const auto pct = [&](const char* metric, const char* p) {
    const json* stats = member(&c, metric);
    if (stats == nullptr && bench) stats = path(c, {"latency_stats", metric});
    return number(member(stats, p)).value_or(0);
  };
  f.id = text(either(c, "condition_id", "condition"));
  f.concurrency = static_cast<uint32_t>(bytes(member(&c, "concurrency")).value_or(0) & 0xffffffffU);
  f.n_ok = bytes(either(c, "n_ok", "n_requests")).value_or(0);
  f.n_errors = bytes(member(&c, "n_errors")).value_or(0);
  f.ttft_p50_ms = pct("ttft_ms", "p50");
  f.ttft_p99_ms = pct("ttft_ms", "p99");
  f.itl_p50_ms = pct("itl_ms", "p50");
  f.itl_p99_ms = pct("itl_ms", "p99");
  f.e2e_p50_ms = pct("e2e_ms", "p50");
  f.e2e_p99_ms = pct("e2e_ms", "p99");
  f.e2e_mean_ms = number(member(
      bench && !member(&c, "e2e_ms") ? path(c, {"latency_stats", "e2e_ms"}) : member(&c, "e2e_ms"),
      "mean"));
  f.output_tokens_per_s = number(either(c, "output_tokens_per_s", "tokens_per_second")).value_or(0);
  f.peak_used_bytes = bytes(member(&c, bench ? "peak_rss_bytes" : "peak_used_bytes"));
  f.peak_rss_bytes = bytes(member(&c, "peak_rss_bytes"));
  f.peak_kv_cache_usage = number(member(&c, "peak_kv_cache_usage"));
  f.preemptions = bytes(member(&c, "preemptions"));
  f.completed = text(member(&c, "status")) != "interrupted";
  return f;
}

// The estimated bytes per component and the flags of `estimate_comparison`, when there is one.
void read_estimate_comparison(const json& s, RunSummary& r) {
  if (const json* rows = path(s, {"estimate_comparison", "rows"}); rows && rows->is_array()) {
    for (const auto& row : *rows) {
      const auto est = number(member(&row, "estimated"));
      if (est && text(member(&row, "unit")) == "bytes") {
        r.estimated[std::string(utf8_prefix(text(member(&row, "component")), 64))] = *est;
      }
    }
  }
  r.estimate_flags = text(path(s, {"estimate_comparison", "estimate_flags"}));
}

void read_profile(const json& s, RunSummary& r) {
  r.kind = "profile";
  r.memory = "GPU";
  r.model = text(path(s, {"model_info", "name"}));
  r.engine = text(path(s, {"engine_metadata", "engine_type"}));
  r.engine_version = text(path(s, {"engine_metadata", "engine_version"}));
  const json* mm = member(&s, "memory_measurements");
  std::map<unsigned, GpuMemory> gpus;
  for (const char* point : {"baseline", "post_warmup", "peak"}) {
    const json* cp = member(mm, point);
    const auto total = bytes(member(cp, "total_bytes"));
    const std::string_view p = point;
    (p == "baseline" ? r.baseline_bytes : p == "peak" ? r.peak_bytes : r.post_warmup_bytes) = total;
    const json* per = member(cp, "per_gpu_details");
    if (per == nullptr || !per->is_array()) continue;
    for (const auto& g : *per) {
      const auto index = bytes(member(&g, "gpu"));
      if (!index || *index > 4096 || gpus.size() > 4096) continue;
      auto& gm = gpus[static_cast<unsigned>(*index)];
      gm.gpu = static_cast<unsigned>(*index);
      if (gm.name.empty()) gm.name = text(member(&g, "name"));
      const auto used = bytes(member(&g, "used_bytes"));
      (p == "baseline" ? gm.baseline_bytes
       : p == "peak"   ? gm.peak_bytes
                       : gm.post_warmup_bytes) = used;
    }
  }
  for (auto& [index, g] : gpus)
    r.gpus.push_back(std::move(g));
  const json* bd = member(&s, "memory_breakdown");
  // A server on the CPU: its parts are the buffers the engine states (read below as reported),
  // only its total, the peak RSS, was sampled.
  const bool host = text(member(bd, "memory")) == "host";
  for (const char* c : {"weights", "kv_cache", "activations", "overhead"}) {
    const json* comp = path(s, {"memory_breakdown", "components", c});
    if (comp != nullptr && !host) r.measured[c] = component(comp);
  }
  if (const auto total = bytes(member(bd, "total_measured_bytes"))) {
    r.measured["total"] = {total, "high",
                           host ? "the server's peak RSS" : "peak used on the busiest GPU"};
  }
  const json* er = member(&s, "engine_reported");
  if (const json* comps = member(er, "components"); comps != nullptr && comps->is_object()) {
    for (const auto& [name, c] : comps->items()) {
      if (const auto b = bytes(member(&c, "bytes")))
        r.reported[to_valid_utf8(name.substr(0, 64))] = *b;
    }
  }
  const json* settings = member(er, "settings");
  r.cuda_graphs = bytes(path(s, {"engine_reported", "settings", "cuda_graphs", "value"}));
  if (!r.cuda_graphs &&
      text(path(s, {"engine_reported", "settings", "enforce_eager", "value"})) == "true") {
    r.cuda_graphs = 0;
  }
  r.num_gpu_blocks = bytes(member(member(settings, "num_gpu_blocks"), "value"));
  r.kv_cache_tokens = bytes(member(member(settings, "kv_cache_tokens"), "value"));
  read_estimate_comparison(s, r);
  if (const json* conds = member(&s, "conditions"); conds && conds->is_array()) {
    for (const auto& c : *conds) {
      if (r.conditions.size() >= k_max_conditions) break;
      r.conditions.push_back(condition(c, false));
    }
  }
  r.n_requests = bytes(path(s, {"requests", "n_requests"})).value_or(0);
  r.n_ok = bytes(path(s, {"requests", "n_ok"})).value_or(0);
  r.n_errors = bytes(path(s, {"requests", "n_errors"})).value_or(0);
  r.status = run_status(r.interrupted, r.n_requests, r.n_ok, r.n_errors);
  r.endpoint = text(path(s, {"metadata", "endpoint"}));
  r.tokens_per_s = number(path(s, {"latency_stats", "tokens_per_second"})).value_or(0);
  r.host_peak_rss_bytes = bytes(path(s, {"host_memory", "peak_rss_bytes"}));
  // A run that sampled no GPU (a server on the CPU) measured its server's host memory: its
  // figures at the capture points are the server's RSS there.
  if (!bytes(path(s, {"memory_measurements", "peak", "total_bytes"})) && r.host_peak_rss_bytes) {
    r.memory = "host RSS";
    r.baseline_bytes = bytes(path(s, {"host_memory", "phases", "baseline", "rss_bytes"}));
    r.post_warmup_bytes = bytes(path(s, {"host_memory", "phases", "post_warmup", "rss_bytes"}));
    r.peak_bytes = r.host_peak_rss_bytes;
  }
  // The command as launched, whole: its flags are settings (a long model path must not cut them).
  if (const json* c = path(s, {"launch", "command"}); c != nullptr && c->is_string()) {
    r.launch_command =
        to_valid_utf8(words_prefix(c->get_ref<const std::string&>(), k_max_summary_command_chars));
  }
}

void read_bench(const json& s, RunSummary& r) {
  r.kind = "bench";
  r.memory = "host RSS";
  const std::string status = text(member(&s, "status"));
  r.status = status == "crashed" ? "failed" : status;
  r.error = text(member(&s, "error"));
  r.model = fs::path(text(path(s, {"settings", "model"}))).filename().string();
  // The engine's name as profile writes it; the first bench layout had only "engine.name".
  r.engine = text(path(s, {"engine_metadata", "engine_type"}));
  if (r.engine.empty()) r.engine = text(path(s, {"engine", "name"}));
  r.engine_version = text(path(s, {"engine_metadata", "engine_version"}));
  if (const auto release = text(path(s, {"engine", "library", "llama_cpp_release"}));
      !release.empty()) {
    r.engine_version += (r.engine_version.empty() ? "" : ", ") + release;
  }
  // The capture points as profile writes them (baseline: loaded and idle); the first layout had
  // only the phases, of which before_load stood for the baseline.
  r.baseline_bytes = bytes(path(s, {"memory_measurements", "baseline", "total_bytes"}));
  if (!r.baseline_bytes && !member(&s, "memory_measurements"))
    r.baseline_bytes = bytes(path(s, {"host_memory", "phases", "before_load", "rss_bytes"}));
  r.post_warmup_bytes = bytes(path(s, {"host_memory", "phases", "after_warmup", "rss_bytes"}));
  r.peak_bytes = bytes(path(s, {"host_memory", "peak_rss_bytes"}));
  r.host_peak_rss_bytes = r.peak_bytes;
  const json* bd = member(&s, "memory_breakdown");
  // The parts are in `components`, as profile writes them; the first layout kept them in the
  // breakdown itself.
  const json* parts = member(bd, "components") != nullptr ? member(bd, "components") : bd;
  for (const char* c : {"weights", "kv_cache", "activations", "overhead"}) {
    if (const json* comp = member(parts, c)) r.measured[c] = component(comp);
  }
  if (const auto growth = bytes(member(bd, "process_growth_bytes"))) {
    r.measured["total"] = {growth, "high", "peak RSS growth since before load"};
  }
  if (const json* er = member(&s, "engine_reported"); er && er->is_array()) {
    uint64_t model = 0, context = 0, compute = 0;
    for (const auto& e : *er) {
      model += bytes(member(&e, "model_bytes")).value_or(0);
      context += bytes(member(&e, "context_bytes")).value_or(0);
      compute += bytes(member(&e, "compute_bytes")).value_or(0);
    }
    if (!er->empty())
      r.reported = {{"weights", model}, {"kv_cache", context}, {"compute", compute}};
  }
  // The comparison bench writes like profile's (--estimate-with's plan, or its own settings');
  // runs from before it have only the plan of their own settings in memory_breakdown.
  read_estimate_comparison(s, r);
  if (const json* plan = member(bd, "estimate"); plan && plan->is_object() && r.estimated.empty()) {
    const auto put = [&](const char* name, const char* key) {
      if (const auto v = number(member(plan, key))) r.estimated[name] = *v;
    };
    put("weights", "weights_bytes");
    put("kv_cache", "kv_cache_bytes");
    put("activations", "compute_bytes");
    put("total", "host_total_bytes");
  }
  if (const json* conds = member(&s, "conditions"); conds && conds->is_array()) {
    double tokens = 0, wall_ms = 0;
    for (const auto& c : *conds) {
      if (r.conditions.size() >= k_max_conditions) break;
      r.conditions.push_back(condition(c, true));
      r.n_ok += r.conditions.back().n_ok;
      tokens += number(member(&c, "output_tokens")).value_or(0);
      wall_ms += number(member(&c, "wall_ms")).value_or(0);
    }
    if (wall_ms > 0) r.tokens_per_s = tokens / (wall_ms / 1000.0);
  }
  r.n_requests = bytes(path(s, {"requests", "n_requests"})).value_or(r.n_ok);
  if (const json* st = member(&s, "settings")) flatten(*st, "bench", 0, r.settings);
}

Expected<json> parse_json(std::string_view text, const std::string& what) {
  if (text.size() > k_max_run_document_bytes) {
    return fail(ErrorKind::input,
                fmt::format("{} is over {} MiB", what, k_max_run_document_bytes >> 20));
  }
  return parse_json_input(text, what);
}

// `nodes`: each node of a multi-node job and its GPUs, as its own sampler recorded them.
void read_nodes(const json& s, RunSummary& r) {
  const json* nodes = member(&s, "nodes");
  if (nodes == nullptr || !nodes->is_array()) return;
  for (const auto& n : *nodes) {
    if (r.nodes.size() >= 4096) break;
    NodeMemory node{text(member(&n, "node")), text(member(&n, "trace")), {}};
    const json* gpus = member(&n, "gpus");
    if (node.node.empty() || gpus == nullptr || !gpus->is_array()) continue;
    for (const auto& g : *gpus) {
      const auto index = bytes(member(&g, "gpu"));
      if (!index || *index > 4096 || node.gpus.size() >= 4096) continue;
      GpuMemory gm;
      gm.gpu = static_cast<unsigned>(*index);
      gm.baseline_bytes = bytes(member(&g, "first_used_bytes"));
      gm.peak_bytes = bytes(member(&g, "peak_used_bytes"));
      node.gpus.push_back(std::move(gm));
    }
    r.nodes.push_back(std::move(node));
  }
}

Expected<RunSummary> read_documents(const json& s, const json& manifest, const fs::path& dir) {
  if (!s.is_object() || member(&s, "run_id") == nullptr ||
      (member(&s, "memory_measurements") == nullptr && text(member(&s, "kind")) != "bench")) {
    return fail(ErrorKind::input,
                fmt::format("{}: summary.json is not a kvprof run summary", dir.string()));
  }
  RunSummary r;
  r.dir = dir;
  r.id = text(member(&s, "run_id"));
  r.simulated = member(&s, "simulated") != nullptr && member(&s, "simulated")->is_boolean() &&
                member(&s, "simulated")->get<bool>();
  r.interrupted = member(&s, "interrupted") != nullptr && member(&s, "interrupted")->is_boolean() &&
                  member(&s, "interrupted")->get<bool>();
  r.memory_source = text(member(&s, "memory_source"));
  r.started_unix_s = number(path(s, {"metadata", "started_unix_s"}))
                         .value_or(number(member(&s, "started_unix_s")).value_or(0));
  r.duration_s = number(path(s, {"metadata", "duration_s"}))
                     .value_or(number(member(&s, "duration_s")).value_or(0));
  if (text(member(&s, "kind")) == "bench") {
    read_bench(s, r);
  } else {
    read_profile(s, r);
  }
  read_nodes(s, r);
  if (const json* conf = member(&manifest, "configuration")) flatten(*conf, "", 0, r.settings);
  // Two runs of different releases differ in this setting (compare lists it).
  if (!r.engine_version.empty()) r.settings["engine version"] = r.engine_version;
  if (r.estimate_flags.empty()) {
    r.estimate_flags = text(path(manifest, {"configuration", "estimate_flags"}));
  }
  for (const auto& [flag, value] : command_flags(r.launch_command)) {
    if (r.settings.size() >= k_max_settings) break;
    r.settings["launch " + flag] = value;
  }
  return r;
}

}  // namespace

std::string run_status(bool interrupted, uint64_t n_requests, uint64_t n_ok, uint64_t n_errors) {
  if (interrupted) return "interrupted";
  if (n_requests > 0 && n_ok == 0) return "failed";
  if (n_errors > 0) return "partial";
  return "completed";
}

std::string RunSummary::gpu_name() const {
  if (!gpus.empty()) return gpus.front().name;
  if (memory_source == "nvml") return "GPU (NVML)";  // a bench run offloading to a GPU
  return memory == "host RSS" ? "none (CPU)" : "";
}

std::map<std::string, std::string> command_flags(std::string_view command) {
  command = words_prefix(command, k_max_summary_command_chars);
  std::vector<std::string> tokens;
  std::string current;
  bool in_token = false;
  char quote = 0;
  for (char c : command) {
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else {
        current += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_token = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_token) tokens.push_back(std::move(current));
      current.clear();
      in_token = false;
    } else {
      current += c;
      in_token = true;
    }
    if (tokens.size() >= k_max_command_tokens) break;
  }
  if (in_token && tokens.size() < k_max_command_tokens) tokens.push_back(std::move(current));
  std::map<std::string, std::string> out;
  if (tokens.empty()) return out;
  size_t i = 0;
  std::string program = fs::path(tokens[i++]).filename().string();
  if (i < tokens.size() && !tokens[i].starts_with("-")) program += " " + tokens[i++];
  out["program"] = to_valid_utf8(program);
  const auto is_flag = [](const std::string& t) {
    return t.size() > 1 && t[0] == '-' && !(std::isdigit(static_cast<unsigned char>(t[1])) != 0);
  };
  size_t positional = 0;
  for (; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    std::string name, value;
    if (!is_flag(t)) {
      name = fmt::format("arg{}", ++positional);
      value = t;
    } else if (const size_t eq = t.find('='); eq != std::string::npos) {
      name = t.substr(0, eq);
      value = t.substr(eq + 1);
    } else if (i + 1 < tokens.size() && !is_flag(tokens[i + 1])) {
      name = t;
      value = tokens[++i];
    } else {
      name = t;
      value = "true";
    }
    if (name == "--port" || name == "--host" || name == "-p") continue;
    out[to_valid_utf8(name.substr(0, 100))] = to_valid_utf8(value.substr(0, k_max_value_chars));
  }
  return out;
}

Expected<RunSummary> read_run_summary(const json& summary, const json& manifest,
                                      const fs::path& dir) {
  return read_json_input(dir.string(), [&]() -> Expected<RunSummary> {
    return read_documents(summary, manifest, dir);
  });
}

Expected<RunSummary> parse_run_summary(std::string_view summary_text,
                                       std::string_view manifest_text, const fs::path& dir) {
  return read_json_input(dir.string(), [&]() -> Expected<RunSummary> {
    auto summary = parse_json(summary_text, (dir / "summary.json").string());
    if (!summary) return std::unexpected(summary.error());
    json manifest;
    if (!manifest_text.empty()) {
      auto m = parse_json(manifest_text, (dir / "manifest.json").string());
      if (!m) return std::unexpected(m.error());
      manifest = std::move(*m);
    }
    return read_documents(*summary, manifest, dir);
  });
}

}  // namespace kvprof::results
