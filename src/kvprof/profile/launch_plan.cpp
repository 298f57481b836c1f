// The plan of a launched server from its command (see launch_plan.hpp).
#include "kvprof/profile/launch_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "kvprof/engines/assumptions.hpp"
#include "kvprof/engines/registry.hpp"
#include "kvprof/gpu/gpu_catalog.hpp"
#include "kvprof/model/resolve.hpp"
#include "kvprof/sys/host_info.hpp"
#include "kvprof/sys/subprocess.hpp"
#include "kvprof/util/redact.hpp"
#include "kvprof/util/shell.hpp"
#include "kvprof/util/units.hpp"

namespace kvprof::profile {

namespace {

// What `llama-server --version` says of its build ("version: 7166 (eec1e33a9)"); empty when the
// program is not there or says nothing in 5 s.
std::string ask_llama_server_version(std::string_view command) {
  const auto words = split_shell_words(command);
  if (!words) return {};
  const auto it = std::find_if(words->begin(), words->end(), [](const std::string& w) {
    return std::filesystem::path(w).filename() == "llama-server";
  });
  if (it == words->end()) return {};
  const char* path_env = std::getenv("PATH");
  const std::string& program = *it;
  const auto path = program.find('/') != std::string::npos
                        ? std::optional<std::string>(program)
                        : sys::find_executable(program, path_env != nullptr ? path_env : "");
  if (!path) return {};
  sys::CommandOptions o;
  o.timeout = std::chrono::seconds(5);
  o.max_output_bytes = 64 << 10;
  const auto r = sys::run_command({*path, "--version"}, o);
  if (!r || r->timed_out) return {};
  return sys::pick_version_line(r->stdout_text, r->stderr_text).value_or("");
}

}  // namespace

Expected<LaunchPlan> plan_from_launch(std::string_view command, const workload::GridOptions& grid,
                                      gpu::MemorySource* memory, unsigned gpu_index,
                                      std::string_view engine_version) {
  // The server's release: as given, else what llama-server says of itself; the reading of its
  // flags follows that release's defaults (slots, context).
  std::string release(engine_version);
  if (release.empty()) release = ask_llama_server_version(command);
  auto reading = engines::read_launch_command(command);
  if (!reading) {
    return fail(ErrorKind::not_found, "kvprof does not read this server's flags");
  }
  if (!release.empty()) {
    if (auto v = engines::parse_engine_version(reading->settings.engine, release)) {
      estimate::EngineSettings base;
      base.engine_version = *v;
      if (auto again = engines::read_launch_command(command, base)) reading = std::move(again);
      reading->given.insert("engine-version");
    } else {
      reading->notes.push_back(
          fmt::format("the server's release '{}' is not one kvprof reads: planned with the "
                      "newest rules",
                      release.substr(0, 80)));
    }
  }
  std::error_code ec;
  if (reading->model.empty() || !std::filesystem::exists(reading->model, ec)) {
    return fail(ErrorKind::not_found,
                fmt::format("the launch names no local model file ({} {})", reading->program,
                            reading->model.empty() ? "without -m" : reading->model));
  }
  estimate::EstimateInput in;
  auto model = model::load_model(reading->model);
  if (!model) {
    return fail(ErrorKind::not_found, model.error().message);
  }
  in.model = std::move(*model);
  in.settings = reading->settings;
  engines::AssumptionSources sources;
  sources.given = reading->given;
  std::optional<std::string> gpu_name;
  if (memory != nullptr) {
    if (auto d = memory->device_info(gpu_index); d && d->name) gpu_name = d->name;
  }
  // The GPU the memory source sees, or llama.cpp on the CPU; a GPU engine needs one.
  auto device = engines::plan_device(in.settings, "", gpu_name, "");
  if (!device) return std::unexpected(device.error());
  if (gpu::names_no_gpu(device->gpu)) {
    in.gpu = gpu::no_gpu();
    in.settings.no_gpu = true;
  } else {
    in.gpu = *gpu::find_gpu(device->gpu);
  }
  sources.gpu_origin = device->origin;
  sources.gpu_note = device->note;
  std::set<uint64_t> contexts;
  for (uint32_t in_len : grid.input_lens) {
    for (uint32_t out_len : grid.output_lens)
      contexts.insert(uint64_t{in_len} + out_len);
  }
  in.workload.context_tokens.assign(contexts.begin(), contexts.end());
  in.workload.concurrency = grid.concurrencies;
  auto est = engines::plan(in);
  if (!est) {
    return fail(ErrorKind::not_found, est.error().message);
  }
  LaunchPlan out;
  out.estimate = std::move(*est);
  out.flags = fmt::format("the launch command ({}, {})", reading->program,
                          redact_secrets(std::string(command)).substr(0, 300));
  out.assumptions = engines::estimate_assumptions(out.estimate, sources);
  out.notes = std::move(reading->notes);
  return out;
}

namespace {

// kvprof serve names itself in /props's build_info: "kvprof 0.1.0 (libllama 0.5.0-dev)".
bool is_kvprof_serve(const PropsFacts& props) {
  return props.build.starts_with("kvprof ");
}

// The release /props states: llama-server's build_info ("b6527-a1b2c3d"), or the libllama
// behind kvprof serve.
std::string props_release(const PropsFacts& props) {
  if (!is_kvprof_serve(props)) return props.build;
  const size_t at = props.build.find("(libllama ");
  if (at == std::string::npos) return {};
  const std::string rest = props.build.substr(at + 10);
  return rest.substr(0, rest.find(')'));
}

// The server command /props describes: its model, `slots` slots of `slot_ctx` tokens, the
// cells shared by the slots (`shared`) or split between them.
std::string props_command(const PropsFacts& props, uint64_t slot_ctx, uint32_t slots, bool shared) {
  return fmt::format("{} -m {} -c {} -np {} {}",
                     is_kvprof_serve(props) ? "kvprof serve" : "llama-server",
                     shell_quote(props.model_path), shared ? slot_ctx : slot_ctx * slots, slots,
                     shared ? "--kv-unified" : "--no-kv-unified");
}

uint64_t reported_kv_bytes(const enginelog::EngineLogReport& buffers) {
  uint64_t kv = 0;
  for (const auto& d : enginelog::totals_by_device(buffers))
    kv += d.kv_cache_bytes;
  return kv;
}

// The plan's KV cache on every device (host and GPUs).
uint64_t kv_total(const LaunchPlan& p) {
  return p.estimate.engine_report.available_kv_cache_bytes;
}

}  // namespace

Expected<LaunchPlan> plan_from_props(const PropsFacts& props, const workload::GridOptions& grid,
                                     gpu::MemorySource* memory, unsigned gpu_index) {
  std::error_code ec;
  if (props.model_path.empty() || !std::filesystem::is_regular_file(props.model_path, ec)) {
    return fail(
        ErrorKind::not_found,
        props.model_path.empty()
            ? std::string("the server's /props names no model file")
            : fmt::format("the server's model file ({}) is not on this host", props.model_path));
  }
  if (!props.slot_context_tokens) {
    return fail(ErrorKind::not_found, "the server's /props states no slot context (n_ctx)");
  }
  const uint64_t slot_ctx = *props.slot_context_tokens;
  const uint32_t slots = props.total_slots.value_or(1);
  const auto plan_of = [&](bool shared) {
    return plan_from_launch(props_command(props, slot_ctx, slots, shared), grid, memory, gpu_index,
                            props_release(props));
  };
  std::string how;
  Expected<LaunchPlan> plan = fail(ErrorKind::not_found, "");
  if (slots == 1) {
    plan = plan_of(true);
    how = fmt::format("1 slot of {} tokens", slot_ctx);
  } else if (props.context_tokens) {
    // kvprof serve states its cells: a shared cache holds one slot's context.
    const bool shared = *props.context_tokens == slot_ctx;
    plan = plan_of(shared);
    how = fmt::format("{} slots of {} tokens, {} ({} cells, as it states)", slots, slot_ctx,
                      shared ? "one shared cache" : "split", *props.context_tokens);
  } else if (props.buffers && reported_kv_bytes(*props.buffers) > 0) {
    // Its KV buffer says which: the plan whose cache is that size.
    auto shared = plan_of(true);
    auto split = plan_of(false);
    if (!shared || !split) return shared ? std::move(split) : std::move(shared);
    const double kv = static_cast<double>(reported_kv_bytes(*props.buffers));
    const auto off = [&](const LaunchPlan& p) {
      return std::abs(static_cast<double>(p.estimate.engine_report.available_kv_cache_bytes) - kv);
    };
    const bool is_shared = off(*shared) <= off(*split);
    plan = is_shared ? std::move(shared) : std::move(split);
    how = fmt::format("{} slots of {} tokens, {} (from its KV buffer)", slots, slot_ctx,
                      is_shared ? "one shared cache" : "split");
  } else {
    plan = plan_of(false);
    if (plan) {
      auto shared = plan_of(true);
      plan->notes.push_back(fmt::format(
          "the server's /props cannot tell a cache its {} slots share (-kvu; llama-server's "
          "default without -np) from split slots: planned as split slots ({} cells){}; give "
          "--estimate-with to plan the other",
          slots, slot_ctx * slots,
          shared ? fmt::format(
                       ", a shared cache would hold {} cells ({:.2f} GiB less KV)", slot_ctx,
                       bytes_to_gib(kv_total(*plan) - std::min(kv_total(*plan), kv_total(*shared))))
                 : std::string()));
    }
    how = fmt::format("{} slots of {} tokens, split", slots, slot_ctx);
  }
  if (!plan) return plan;
  plan->flags = fmt::format("the server's /props ({}; {})",
                            std::filesystem::path(props.model_path).filename().string(), how);
  return plan;
}

}  // namespace kvprof::profile
