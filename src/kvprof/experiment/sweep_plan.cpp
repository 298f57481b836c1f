// Planning a sweep (see sweep_plan.hpp): the model of each entry resolved (or built from the
// architecture it gives), the planner's estimate, fit and time per configuration.
#include "kvprof/experiment/sweep_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "kvprof/engines/assumptions.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/architecture.hpp"
#include "kvprof/model/dtype.hpp"
#include "kvprof/model/hf_config.hpp"
#include "kvprof/model/resolve.hpp"
#include "kvprof/profile/launcher.hpp"
#include "kvprof/util/strings.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::experiment {

namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// The settings that decide what a configuration measures (not its position in the file).
nlohmann::json identity(const ModelEntry& e, const SweepSettings& s) {
  nlohmann::json j = {{"model_id", e.model_id},
                      {"input_lengths", e.input_lengths},
                      {"output_lengths", e.output_lengths},
                      {"batch_sizes", e.batch_sizes},
                      {"dtype", e.dtype},
                      {"tensor_parallel_size", e.tensor_parallel_size},
                      {"quantization", e.quantization},
                      {"kv_cache_dtype", e.kv_cache_dtype},
                      {"launch", e.launch},
                      {"endpoint", e.endpoint},
                      {"engine", e.engine},
                      {"gpu", e.gpu},
                      {"requests_per_condition", s.requests_per_condition}};
  j["gpu_memory_utilization"] =
      e.gpu_memory_utilization ? nlohmann::json(*e.gpu_memory_utilization) : nlohmann::json();
  j["max_model_len"] = e.max_model_len ? nlohmann::json(*e.max_model_len) : nlohmann::json();
  // Only when given: the fingerprints of files without them stay as they were (resumes match).
  if (e.pipeline_parallel_size != 1) j["pipeline_parallel_size"] = e.pipeline_parallel_size;
  if (!e.container_name.empty()) j["container_name"] = e.container_name;
  return j;
}

std::string slug(const std::string& model_id) {
  std::string base = model_id;
  while (!base.empty() && base.back() == '/')
    base.pop_back();
  if (const size_t slash = base.rfind('/'); slash != std::string::npos)
    base = base.substr(slash + 1);
  std::string out;
  for (const char c : to_lower(base)) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-';
    out += ok ? c : '-';
    if (out.size() >= 40) break;
  }
  return out.empty() ? "model" : out;
}

std::string label_of(const ModelEntry& e) {
  std::string s = fmt::format("{} tp{}", e.model_id, e.tensor_parallel_size);
  if (e.pipeline_parallel_size > 1) s += fmt::format(" pp{}", e.pipeline_parallel_size);
  if (e.dtype != "auto") s += " " + e.dtype;
  if (!e.quantization.empty()) s += " " + e.quantization;
  if (e.kv_cache_dtype != "auto") s += " kv:" + e.kv_cache_dtype;
  if (e.gpu_memory_utilization) s += fmt::format(" util {}", *e.gpu_memory_utilization);
  if (e.max_model_len) s += fmt::format(" len {}", *e.max_model_len);
  return s;
}

// The architecture keys of an entry.
model::ArchitectureHints hints_of(const ModelEntry& e) {
  model::ArchitectureHints h;
  h.params = e.model_params;
  h.n_layer = e.num_layers;
  h.n_head = e.num_heads;
  h.n_head_kv = e.num_kv_heads;
  h.head_dim = e.head_dim;
  h.hidden_size = e.hidden_size;
  h.intermediate_size = e.intermediate_size;
  h.vocab_size = e.vocab_size;
  return h;
}

// A model the catalog does not know, described by the architecture keys of its entry.
Expected<model::ModelSpec> model_from_dims(const ModelEntry& e, std::vector<std::string>& notes) {
  uint64_t max_len = e.max_model_len.value_or(0);
  if (max_len == 0) {
    uint64_t longest = 0;
    for (uint32_t in_len : e.input_lengths) {
      for (uint32_t out_len : e.output_lengths)
        longest = std::max<uint64_t>(longest, uint64_t{in_len} + out_len);
    }
    max_len = 4096;
    while (max_len < longest)
      max_len *= 2;
    notes.push_back(fmt::format("no max_model_len given: planned with {} tokens", max_len));
  }
  return model::model_from_hints(e.model_id, hints_of(e), max_len,
                                 e.dtype == "auto" ? "bfloat16" : e.dtype, notes);
}

// The model of an entry; the architecture keys given are checked against it.
Expected<model::ModelSpec> resolve_entry_model(const ModelEntry& e,
                                               std::vector<std::string>& notes) {
  auto spec = model::load_model(e.model_id);
  if (!spec) {
    if (e.num_layers && e.hidden_size && e.num_heads) {
      notes.push_back(
          fmt::format("'{}' is not in the catalog: planned from the architecture "
                      "given (a Llama-like dense model)",
                      e.model_id));
      return model_from_dims(e, notes);
    }
    return fail(spec.error().kind, spec.error().message +
                                       "; or describe it with num_layers, hidden_size and "
                                       "num_heads");
  }
  for (auto& note : model::check_hints(*spec, hints_of(e)))
    notes.push_back(std::move(note));
  return spec;
}

// The engine settings an entry's keys state (the YAML's engine, or vLLM).
Expected<estimate::EngineSettings> settings_of(const ModelEntry& e) {
  estimate::EngineSettings s;
  auto engine = engines::parse_planned_engine(e.engine);
  if (!engine) return std::unexpected(engine.error());
  s.engine = *engine;
  s.tensor_parallel_size = e.tensor_parallel_size;
  s.pipeline_parallel_size = e.pipeline_parallel_size;
  s.gpu_memory_utilization = e.gpu_memory_utilization;
  s.max_model_len = e.max_model_len;
  if (e.dtype != "auto") s.dtype = model::parse_dtype(e.dtype);
  s.quantization = e.quantization;
  auto kv = estimate::parse_kv_cache_dtype(e.kv_cache_dtype);
  if (!kv) return std::unexpected(kv.error());
  s.kv_cache_dtype = *kv;
  return s;
}

Expected<estimate::Estimate> estimate_entry(const ModelEntry& e, const std::string& gpu,
                                            model::ModelSpec spec,
                                            estimate::EngineSettings settings) {
  estimate::EstimateInput in;
  in.model = std::move(spec);
  in.settings = std::move(settings);
  if (gpu::names_no_gpu(gpu)) {
    in.gpu = gpu::no_gpu();
    in.settings.no_gpu = true;
  } else {
    auto g = gpu::find_gpu(gpu);
    if (!g) return std::unexpected(g.error());
    in.gpu = *g;
  }
  std::set<uint64_t> contexts;
  for (uint32_t in_len : e.input_lengths) {
    for (uint32_t out_len : e.output_lengths)
      contexts.insert(uint64_t{in_len} + out_len);
  }
  in.workload.context_tokens.assign(contexts.begin(), contexts.end());
  in.workload.concurrency = e.batch_sizes;
  return engines::plan(in);
}

// What the entry's `launch` starts, read from the command as it will run (placeholders filled,
// port 0): the engine, the model file and the engine's own flags over the entry's keys.
std::optional<estimate::LaunchReading> read_entry_launch(const ModelEntry& e,
                                                         const estimate::EngineSettings& base,
                                                         const std::string& gpu) {
  if (e.launch.empty()) return std::nullopt;
  auto command = launch_command(e, gpu, "127.0.0.1", 0);
  if (!command) return std::nullopt;
  return engines::read_launch_command(*command, base);
}

// "planned as llama.cpp from its launch (llama-server): -c 8192, 4 slots of 2048 cells".
std::string launch_note(const estimate::LaunchReading& r) {
  const auto& s = r.settings;
  std::string text = fmt::format("planned as {} from its launch ({})",
                                 engines::engine_row(s.engine).display_name, r.program);
  if (s.engine == engines::Engine::llamacpp && s.max_model_len) {
    const uint64_t ctx = *s.max_model_len;
    const uint64_t per_slot = s.kv_unified ? ctx : ctx / std::max(1U, s.n_parallel);
    text += fmt::format(": -c {}, {} slot{} {}", ctx, s.n_parallel, s.n_parallel == 1 ? "" : "s",
                        s.kv_unified ? fmt::format("sharing {} cells", ctx)
                                     : fmt::format("of {} cells each", per_slot));
  }
  return text;
}

// Seconds one condition should take: prefill at a fraction of peak FLOPs, decode steps reading the
// weights and the batch's KV at a fraction of peak bandwidth; the simulator decodes at its speed.
double condition_seconds(const PlannedConfig& pc, uint32_t in_len, uint32_t out_len,
                         uint32_t batch) {
  const double waves = pc.grid.n_per_condition;
  if (pc.server == ServerKind::simulator) return waves * (out_len / k_sim_tokens_per_s + 0.01);
  if (!pc.estimate) return 0;
  const auto& est = *pc.estimate;
  const double weights = static_cast<double>(est.per_gpu.weights_bytes);
  const double bw = est.gpu.bandwidth_gb_s * 1e9 * k_bandwidth_fraction;
  const double flops = est.gpu.tflops_bf16 * 1e12 * k_flops_fraction;
  if (bw <= 0 || flops <= 0) return 0;
  // Two FLOPs per parameter and token; at about two bytes per parameter that is weights bytes.
  const double prefill_s = batch * static_cast<double>(in_len) * weights / flops;
  const double mean_ctx = in_len + out_len / 2.0;
  const double kv_read = batch * mean_ctx * static_cast<double>(est.kv_bytes_per_token);
  const double decode_s = out_len * (weights + kv_read) / bw;
  return waves * (prefill_s + decode_s);
}

}  // namespace

double min_condition_s(const SweepSettings& settings, ServerKind server) {
  return settings.min_condition_s.value_or(server == ServerKind::simulator ? 0.2 : 1.0);
}

namespace {

void plan_conditions(PlannedConfig& pc, const SweepSettings& s) {
  const ModelEntry& e = pc.entry;
  const double startup_s =
      gpu::names_no_gpu(pc.gpu) ? k_assumed_cpu_startup_s : k_assumed_startup_s;
  double total = pc.server == ServerKind::launch ? startup_s : 0.0;
  total += s.baseline_s + s.post_warmup_s + 0.5 * s.warmup_requests;
  const uint64_t max_len = pc.estimate && pc.estimate->settings.max_model_len
                               ? *pc.estimate->settings.max_model_len
                               : e.max_model_len.value_or(0);
  for (uint32_t in_len : e.input_lengths) {
    for (uint32_t out_len : e.output_lengths) {
      for (uint32_t batch : e.batch_sizes) {
        PlannedCondition c;
        c.input_len = in_len;
        c.output_len = out_len;
        c.batch_size = batch;
        const uint64_t ctx = uint64_t{in_len} + out_len;
        if (pc.estimate) {
          for (const auto& row : pc.estimate->rows) {
            if (row.context_tokens != ctx || row.concurrency != batch) continue;
            c.kv_needed_bytes = row.kv_needed_bytes;
            c.kv_capacity_bytes = row.kv_capacity_bytes;
            // A queued condition still runs (slower); a rejected or failing one does not.
            c.fits = row.verdict <= estimate::Verdict::queues;
            c.refused = row.verdict == estimate::Verdict::rejected;
            c.note = row.note;
          }
        }
        if (max_len > 0 && ctx > max_len) {
          c.fits = false;
          c.refused = true;
          c.note = fmt::format("input + output {} is over max_model_len {}: the server rejects it",
                               ctx, max_len);
        }
        c.expected_s =
            std::max(condition_seconds(pc, in_len, out_len, batch), min_condition_s(s, pc.server));
        total += c.expected_s;
        pc.conditions.push_back(std::move(c));
      }
    }
  }
  pc.expected_s = total;
}

// Leaves out of the grid the input lengths whose requests the server refuses (a request longer
// than its context, or than a llama.cpp slot), so the run measures what it takes; none left: the
// configuration cannot run.
void drop_refused_lengths(PlannedConfig& pc) {
  std::vector<uint32_t> kept;
  std::string why;
  for (uint32_t in_len : pc.entry.input_lengths) {
    const auto refused =
        std::find_if(pc.conditions.begin(), pc.conditions.end(),
                     [in_len](const auto& c) { return c.input_len == in_len && c.refused; });
    if (refused == pc.conditions.end()) {
      kept.push_back(in_len);
    } else if (why.empty()) {
      why = refused->note;
    }
  }
  if (kept.size() == pc.entry.input_lengths.size()) return;
  if (kept.empty()) {
    if (pc.fits) {
      pc.fits = false;
      pc.reason = "every input length is refused by the server: " + why;
    }
    return;
  }
  std::string left_out;
  for (uint32_t in_len : pc.entry.input_lengths) {
    if (std::find(kept.begin(), kept.end(), in_len) == kept.end())
      left_out += fmt::format("{}{}", left_out.empty() ? "" : ", ", in_len);
  }
  pc.notes.push_back(fmt::format("input length {} not run: {}", left_out, why));
  pc.grid.input_lens = kept;
  pc.n_requests = workload::grid_size(pc.grid).n_requests;
  double skipped_s = 0;
  for (const auto& c : pc.conditions) {
    if (std::find(kept.begin(), kept.end(), c.input_len) == kept.end()) skipped_s += c.expected_s;
  }
  pc.expected_s -= skipped_s;
}

std::string fit_reason(const estimate::Estimate& est) {
  const std::string stage = est.start_failure.empty()
                                ? ""
                                : fmt::format("does not start (dies in {}): ", est.start_failure);
  if (est.headroom_bytes < 0) {
    return fmt::format("{}needs {:.1f} GiB per GPU, the {} has {:.1f} GiB", stage,
                       bytes_to_gib(est.per_gpu.total_bytes), est.gpu.id,
                       bytes_to_gib(est.gpu.memory_bytes));
  }
  if (!est.warnings.empty()) return stage + est.warnings.front();
  return stage + "no memory left for the KV cache";
}

}  // namespace

std::string_view server_kind_name(ServerKind kind) {
  switch (kind) {
    case ServerKind::launch:
      return "launch";
    case ServerKind::endpoint:
      return "endpoint";
    case ServerKind::simulator:
      break;
  }
  return "built-in simulator";
}

Plan plan_sweep(const SweepConfig& config, const PlanOptions& options,
                std::vector<ConfigIssue>& errors) {
  Plan plan;
  plan.name = config.settings.name;
  for (const auto& e : config.models) {
    PlannedConfig pc;
    pc.entry = e;
    pc.id = fmt::format("{:02}_{}", e.index + 1, slug(e.model_id));
    pc.fingerprint = fmt::format("{:016x}", fnv1a(identity(e, config.settings).dump()));
    pc.label = label_of(e);
    pc.server = !e.launch.empty()                                  ? ServerKind::launch
                : !e.endpoint.empty() || !e.container_name.empty() ? ServerKind::endpoint
                                                                   : ServerKind::simulator;
    pc.grid.input_lens = e.input_lengths;
    pc.grid.output_lens = e.output_lengths;
    pc.grid.concurrencies = e.batch_sizes;
    pc.grid.prefix_modes = {workload::PrefixMode::low};
    pc.grid.n_per_condition = config.settings.requests_per_condition;
    pc.n_requests = workload::grid_size(pc.grid).n_requests;
    const std::string where = fmt::format("models[{}]: ", e.index);
    if (pc.server == ServerKind::simulator && e.engine != "vllm") {
      errors.push_back({e.pos, where +
                                   "the built-in simulator plays vLLM only: give 'launch' or "
                                   "'endpoint' to profile engine '" +
                                   e.engine + "'"});
    }
    if (pc.server == ServerKind::simulator &&
        e.tensor_parallel_size * e.pipeline_parallel_size > 1) {
      pc.notes.push_back(
          fmt::format("the built-in simulator plays one GPU of the {} with its share "
                      "of the plan (weights and KV cache per GPU)",
                      e.tensor_parallel_size * e.pipeline_parallel_size));
    }
    auto settings = settings_of(e);
    if (!settings) {
      errors.push_back({e.pos, where + settings.error().message});
      continue;
    }
    // The launch command decides the engine, the model file and the engine's own flags.
    // {gpu} in the command: the GPU given, else the catalog GPU found here, else the fallback.
    std::string command_gpu = e.gpu;
    if (command_gpu.empty() && options.gpu_found) {
      if (auto g = gpu::find_gpu(*options.gpu_found)) command_gpu = g->id;
    }
    if (command_gpu.empty()) command_gpu = options.fallback_gpu;
    const auto launched = read_entry_launch(e, *settings, command_gpu);
    ModelEntry planned = e;
    if (launched) {
      if (e.engine_pos.line > 0 && launched->settings.engine != settings->engine) {
        errors.push_back(
            {e.engine_pos, fmt::format("models[{}].engine: '{}', but its launch "
                                       "starts {} ({})",
                                       e.index, e.engine, launched->program,
                                       engines::engine_name(launched->settings.engine))});
        continue;
      }
      *settings = launched->settings;
      if (!launched->model.empty()) planned.model_id = launched->model;
      pc.server_names_model = to_lower(planned.model_id).ends_with(".gguf");
      pc.notes.push_back(launch_note(*launched));
      for (const auto& n : launched->notes)
        pc.notes.push_back(n);
      if (settings->engine == engines::Engine::llamacpp && settings->max_model_len) {
        pc.label = fmt::format("{} {} -c {} -np {}", e.model_id, launched->program,
                               *settings->max_model_len, settings->n_parallel);
      }
    }
    pc.engine = std::string(engines::engine_name(settings->engine));
    // The GPU given, found here or assumed; llama.cpp on the CPU where there is no GPU (or no
    // layer is offloaded).
    auto device = engines::plan_device(*settings, e.gpu, options.gpu_found, options.fallback_gpu);
    if (!device) {
      errors.push_back({e.pos, where + device.error().message});
      continue;
    }
    pc.gpu = device->gpu;
    if (device->origin != engines::GpuOrigin::given || pc.gpu == "cpu") {
      if (!device->note.empty()) pc.notes.push_back(device->note);
    }
    auto spec = resolve_entry_model(planned, pc.notes);
    if (!spec) {
      errors.push_back({e.model_id_pos.line ? e.model_id_pos : e.pos,
                        fmt::format("models[{}].model_id: {}", e.index, spec.error().message)});
      continue;
    }
    auto est = estimate_entry(e, pc.gpu, std::move(*spec), *settings);
    if (!est) {
      pc.fits = false;
      pc.reason = est.error().message;
    } else {
      pc.estimate = std::move(*est);
      if (pc.estimate->verdict == estimate::Verdict::does_not_start ||
          pc.estimate->verdict == estimate::Verdict::oom) {
        pc.fits = false;
        pc.reason = fit_reason(*pc.estimate);
      }
    }
    plan_conditions(pc, config.settings);
    drop_refused_lengths(pc);
    plan.n_conditions += pc.conditions.size();
    plan.n_requests += pc.n_requests;
    if (pc.fits) plan.expected_s += pc.expected_s;
    plan.configs.push_back(std::move(pc));
  }
  return plan;
}

// The vLLM flags for the settings an entry gives ({engine_args}), one word each.
std::vector<std::string> engine_args(const ModelEntry& e) {
  std::vector<std::string> w = {"--tensor-parallel-size", std::to_string(e.tensor_parallel_size)};
  const auto add = [&](const char* flag, std::string value) {
    w.emplace_back(flag);
    w.push_back(std::move(value));
  };
  if (e.pipeline_parallel_size > 1)
    add("--pipeline-parallel-size", std::to_string(e.pipeline_parallel_size));
  if (e.dtype != "auto") add("--dtype", e.dtype);
  if (!e.quantization.empty()) add("--quantization", e.quantization);
  if (e.kv_cache_dtype != "auto") add("--kv-cache-dtype", e.kv_cache_dtype);
  if (e.gpu_memory_utilization)
    add("--gpu-memory-utilization", fmt::format("{}", *e.gpu_memory_utilization));
  if (e.max_model_len) add("--max-model-len", std::to_string(*e.max_model_len));
  return w;
}

Expected<std::string> launch_command(const ModelEntry& e, const std::string& gpu,
                                     const std::string& host, uint16_t port) {
  const uint32_t max_batch =
      e.batch_sizes.empty() ? 1 : *std::max_element(e.batch_sizes.begin(), e.batch_sizes.end());
  const auto opt = [](const auto& v) { return v ? fmt::format("{}", *v) : std::string(); };
  return profile::fill_placeholders(
      e.launch,
      {{"model", e.model_id},
       {"port", std::to_string(port)},
       {"host", host},
       {"max_concurrency", std::to_string(max_batch)},
       {"gpu", gpu},
       {"dtype", e.dtype},
       {"tensor_parallel_size", std::to_string(e.tensor_parallel_size)},
       {"pipeline_parallel_size", std::to_string(e.pipeline_parallel_size)},
       {"quantization", e.quantization},
       {"kv_cache_dtype", e.kv_cache_dtype},
       {"gpu_memory_utilization", opt(e.gpu_memory_utilization)},
       {"max_model_len", opt(e.max_model_len)}},
      {{"engine_args", engine_args(e)}});
}

std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const auto s = static_cast<uint64_t>(std::llround(seconds));
  if (s < 3600) return fmt::format("{}m {:02}s", s / 60, s % 60);
  return fmt::format("{}h {:02}m", s / 3600, (s % 3600) / 60);
}

}  // namespace kvprof::experiment
